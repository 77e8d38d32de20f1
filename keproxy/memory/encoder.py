"""A mean-pooling BERT sentence encoder on torch and ``tokenizers`` alone, for sentence-transformers folders that
need no more (all-MiniLM-L6-v2).

Importing ``sentence_transformers`` costs ~200 MiB of resident memory per process (it imports scikit-learn,
SciPy and Pillow: 301 -> 508 MiB measured after torch), and ``transformers``' model classes import SciPy and
Pillow too; a proxy worker that only embeds short queries with MiniLM needs none of it.
:func:`load_mean_pooling_encoder` reads a sentence-transformers folder whose modules are exactly Transformer
(a BERT with absolute positions and exact GELU) -> Pooling (mean of the tokens only) [-> Normalize] and
computes the same embeddings with :class:`BertEncoder` (the BERT forward pass of ``transformers.BertModel``,
inference only, weights read from ``model.safetensors``) and the folder's fast tokenizer (``tokenizer.json``):
the last layer's word-piece vectors averaged over the attention mask, texts stripped and truncated at the
folder's ``max_seq_length`` as sentence-transformers does. Cosine to sentence-transformers' vectors: >= 0.9999
(``tests/memory/test_batching.py`` checks it). Any other folder gives None (the caller uses sentence-transformers).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["BertEncoder", "MeanPoolingEncoder", "load_mean_pooling_encoder", "read_mean_pooling_folder"]

_TRANSFORMER = "sentence_transformers.models.Transformer"
_POOLING = "sentence_transformers.models.Pooling"
_NORMALIZE = "sentence_transformers.models.Normalize"


class BertEncoder:
    """BERT's encoder (HF ``BertModel`` without pooler, eval mode): ``(ids, mask) -> last hidden states``.

    weights: the safetensors state dict of a ``BertModel`` (keys ``embeddings.*``, ``encoder.layer.N.*``).
    config: its ``config.json`` (hidden_size, num_attention_heads, num_hidden_layers, layer_norm_eps).
    """

    def __init__(self, weights: dict[str, Any], config: dict[str, Any]) -> None:
        self.w = {k: v.float() for k, v in weights.items() if not k.startswith("pooler.")}
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))

    def _norm(self, x: Any, name: str) -> Any:
        import torch

        weight = self.w[f"{name}.weight"]  # its static shape, not x's: the ONNX export needs a constant
        return torch.nn.functional.layer_norm(x, weight.shape, weight, self.w[f"{name}.bias"], self.eps)

    def _linear(self, x: Any, name: str) -> Any:
        import torch

        return torch.nn.functional.linear(x, self.w[f"{name}.weight"], self.w[f"{name}.bias"])

    def __call__(self, ids: Any, mask: Any, types: Any = None) -> Any:
        """ids, mask (and types, the token type ids of a text pair; None: all 0): int64 (batch, length);
        float32 (batch, length, hidden)."""
        import torch

        f = torch.nn.functional
        w, (batch, length) = self.w, ids.shape
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length]
        token_types = w["embeddings.token_type_embeddings.weight"]
        x = self._norm(x + (token_types[0] if types is None else token_types[types]), "embeddings.LayerNorm")
        keep = mask.bool()[:, None, None, :]  # (batch, 1, 1, length): attend to real tokens only
        head = x.shape[-1] // self.heads
        for i in range(self.layers):
            p = f"encoder.layer.{i}"

            def split(t: Any) -> Any:
                return t.view(batch, length, self.heads, head).transpose(1, 2)

            q, k, v = (split(self._linear(x, f"{p}.attention.self.{n}")) for n in ("query", "key", "value"))
            context = f.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=1 / math.sqrt(head))
            context = context.transpose(1, 2).reshape(batch, length, -1)
            x = self._norm(
                self._linear(context, f"{p}.attention.output.dense") + x, f"{p}.attention.output.LayerNorm"
            )
            hidden = f.gelu(self._linear(x, f"{p}.intermediate.dense"))
            x = self._norm(self._linear(hidden, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
        return x


class MeanPoolingEncoder:
    """Tokenizer + :class:`BertEncoder` + mean pooling (+ L2 normalisation), with the ``encode`` signature of
    sentence-transformers' ``SentenceTransformer`` that :class:`keproxy.memory.Embedder` calls."""

    def __init__(self, tokenizer: Any, model: Any, *, max_seq_length: int, dimension: int, normalize: bool):
        self.tokenizer = tokenizer
        self.model = model
        self.max_seq_length = max_seq_length
        self.dimension = dimension
        self.normalize = normalize

    def get_sentence_embedding_dimension(self) -> int:
        return self.dimension

    def encode(
        self,
        sentences: Sequence[str],
        *,
        batch_size: int = 32,
        normalize_embeddings: bool = False,
        **_ignored: Any,
    ) -> np.ndarray:
        """float32 (len(sentences), dimension); rows L2-normalised when the folder or the caller says so."""
        import torch

        texts = [str(s).strip() for s in sentences]  # as sentence-transformers tokenizes
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        # like sentence-transformers: longest first, so a batch pads little
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                rows = order[start : start + batch_size]
                encoded = self.tokenizer.encode_batch([texts[i] for i in rows])
                ids = torch.tensor([e.ids for e in encoded], dtype=torch.int64)
                attention = torch.tensor([e.attention_mask for e in encoded], dtype=torch.int64)
                tokens = self.model(ids, attention)
                mask = attention.unsqueeze(-1).to(tokens.dtype)
                pooled = (tokens * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
                if self.normalize or normalize_embeddings:
                    pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
                out[rows] = pooled.float().numpy()
        return out


def read_mean_pooling_folder(folder: Path | str) -> tuple[Any, int, bool] | None:
    """(tokenizer, dimension, normalize) of a local Transformer + mean Pooling [+ Normalize] folder, the
    tokenizer truncating at ``max_seq_length`` and padding to the longest; None for any other folder.
    Imports ``tokenizers`` only (no torch)."""
    root = Path(folder)
    try:
        modules = json.loads((root / "modules.json").read_text(encoding="utf-8"))
        kinds = [m["type"] for m in sorted(modules, key=lambda m: m["idx"])]
        if kinds not in ([_TRANSFORMER, _POOLING], [_TRANSFORMER, _POOLING, _NORMALIZE]):
            return None
        if modules[0].get("path", "") not in ("", "."):
            return None
        pooling = json.loads((root / modules[1]["path"] / "config.json").read_text(encoding="utf-8"))
        config = json.loads((root / "sentence_bert_config.json").read_text(encoding="utf-8"))
        bert = json.loads((root / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    modes = {k for k, v in pooling.items() if k.startswith("pooling_mode_") and v}
    plain_bert = (
        bert.get("model_type") == "bert" and bert.get("hidden_act") == "gelu"
        and bert.get("position_embedding_type", "absolute") == "absolute"
        and (root / "model.safetensors").is_file() and (root / "tokenizer.json").is_file()
    )  # fmt: skip
    if modes != {"pooling_mode_mean_tokens"} or config.get("do_lower_case") or not plain_bert:
        return None
    from tokenizers import Tokenizer

    max_length = int(config.get("max_seq_length") or bert.get("max_position_embeddings") or 512)
    tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.enable_padding(pad_id=int(bert.get("pad_token_id", 0)), pad_token="[PAD]")  # to the longest
    return tokenizer, int(pooling["word_embedding_dimension"]), len(kinds) == 3


def load_mean_pooling_encoder(folder: Path | str, device: str | None = "cpu") -> MeanPoolingEncoder | None:
    """The encoder of a local sentence-transformers ``folder`` made of Transformer, mean Pooling and optionally
    Normalize (e.g. all-MiniLM-L6-v2); None when the folder is anything else (or not a local folder)."""
    spec = read_mean_pooling_folder(folder)
    if spec is None or device not in (None, "cpu"):
        return None
    from safetensors.torch import load_file

    root = Path(folder)
    tokenizer, dimension, normalize = spec
    bert = json.loads((root / "config.json").read_text(encoding="utf-8"))
    return MeanPoolingEncoder(
        tokenizer, BertEncoder(load_file(str(root / "model.safetensors")), bert),
        max_seq_length=int(tokenizer.truncation["max_length"]), dimension=dimension, normalize=normalize,
    )  # fmt: skip
