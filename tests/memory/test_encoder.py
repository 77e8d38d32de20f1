"""The packaged all-MiniLM-L6-v2 on torch + tokenizers alone: sentence-transformers' vectors, less memory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from keproxy.memory import Embedder
from keproxy.memory.encoder import MeanPoolingEncoder, load_mean_pooling_encoder

TEXTS = [
    "The mother tongue of Danielle Darrieux is English.",
    "  Where Danielle Darrieux is from, people speak the language of  ",
    "Ünïcödé façade — ein kurzer Satz.",
    "",
    "word " * 400,  # truncated at max_seq_length (256 word pieces)
]


def test_same_vectors_as_sentence_transformers() -> None:
    from sentence_transformers import SentenceTransformer

    path = Embedder.from_name_or_path(None).name_or_path
    light = load_mean_pooling_encoder(path)
    assert isinstance(light, MeanPoolingEncoder) and light.get_sentence_embedding_dimension() == 384
    ours = light.encode(TEXTS, batch_size=2)
    theirs = SentenceTransformer(path, device="cpu", local_files_only=True).encode(
        TEXTS, convert_to_numpy=True, normalize_embeddings=True
    )
    assert ours.shape == (len(TEXTS), 384) and ours.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert float(np.min(np.sum(ours * theirs, axis=1))) > 0.9999


def test_other_folders_fall_back(tmp_path: Path) -> None:
    assert load_mean_pooling_encoder(tmp_path) is None  # no modules.json
    (tmp_path / "modules.json").write_text('[{"idx": 0, "name": "0", "path": "", "type": "x.Y"}]')
    assert load_mean_pooling_encoder(tmp_path) is None


def test_the_packaged_embedder_imports_neither_sentence_transformers_nor_transformers() -> None:
    code = (
        "import sys\n"
        "from keproxy.memory import Embedder\n"
        "e = Embedder.from_name_or_path(None, threads=1)\n"
        "assert e.encode(['hello']).shape == (1, 384)\n"
        "print(sorted(m for m in ('sentence_transformers', 'transformers', 'sklearn', 'scipy') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
