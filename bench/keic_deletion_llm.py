"""Deletion (KEIC Algorithm 1) with the App. F LLM backend, rewrite step included: input tokens against OTC.

The same dialogues, detector, span locator and token count as ``bench/keic_deletion.py`` (cl100k_base, OpenAI's
chat format), but INCONSISTENT and DELETE are asked of a model through the App. F chats
(:class:`keproxy.editors.history.deletion.LLMBackend`, with keproxy's own generation parameters,
``keproxy.generation``). The model is a *scripted App. F responder*, not an LLM: it answers each chat as a
model that follows the prompts exactly would, from the instance's ground truth:

- F.1 / F.2 u1 (INCONSISTENT): the story contradicts the correction iff it still holds ``support_old``; a Q/A
  pair iff it is one of the pairs hand-labelled as stating the old fact (``STALE`` of ``keic_deletion.py``).
  Reply: one sentence naming the contradiction, else 'NO MODIFICATION';
- u2 (modify) and u3 (extract): the story with ``support_old`` replaced by ``support_new``; a Q/A pair as its
  question and ``support_new`` as the answer (u2 prefixed by one sentence).

Each reply is cut to the call's ``max_tokens`` (as a server would), and the cuts are counted: with keproxy's
sizing there are none; ``--client-max-tokens 8`` replays what happened when the client's ``max_tokens`` reached
the editor's calls. Measured per dialogue: OTC input tokens (the dialogue as sent), Deletion input tokens
(the forwarded messages + the prompts of every editor call), the editor's completion tokens, upstream calls,
CUR and CUR-ext (hand labels). A real model's replies are longer (App. F asks it to "read the story line by
line" and "think step by step"), so its prompts in u2/u3 are too: the ratio is the protocol's floor.

    nice -n 10 .venv/bin/python bench/keic_deletion_llm.py --limit 15 --templates 1,12 --arrangements cba
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from keic_deletion import DEV_SET, chat_tokenizer, chat_tokens, measure, stale_pairs  # noqa: E402

from keproxy.corrections.detect import default_detector  # noqa: E402
from keproxy.corrections.locate import SpanLocator  # noqa: E402
from keproxy.editors.base import EditContext  # noqa: E402
from keproxy.editors.history.deletion.editor import DeletionEditor  # noqa: E402
from keproxy.editors.history.deletion.llm import LLMBackend  # noqa: E402
from keproxy.editors.history.prompts import (  # noqa: E402
    NO_MODIFICATION,
    QA_EXTRACT_PROMPT,
    QA_MODIFY_PROMPT,
    STORY_EXTRACT_PROMPT,
    STORY_MODIFY_PROMPT,
)
from keproxy.eval.keic.data import Dialogue, build_dialogue, load_keic  # noqa: E402
from keproxy.generation import EditorGeneration  # noqa: E402
from keproxy.messages import Message, message_text  # noqa: E402


def quoted(prompt: str) -> str:
    """The story or "question\\nanswer" an App. F u1 prompt quotes between ``"====`` and ``===="``."""
    start = prompt.index('"====') + len('"====')
    return prompt[start : prompt.index('===="\nCorrection = ')]


class ScriptedAppF:
    """The scripted App. F responder for one dialogue at a time (see the module docstring); an
    ``UpstreamCaller``. ``calls``: (purpose, prompt tokens, completion tokens, max_tokens, cut) per call."""

    def __init__(self, count: Callable[[str], int], client_max_tokens: int | None = None) -> None:
        self.count = count
        self.client_max_tokens = client_max_tokens
        self.dialogue: Dialogue | None = None
        self.calls: list[tuple[str, int, int, int, bool]] = []

    def start(self, dialogue: Dialogue) -> None:
        self.dialogue, self.calls = dialogue, []

    def _reply(self, messages: Sequence[Message]) -> str:
        d = self.dialogue
        assert d is not None
        text = quoted(message_text(messages[0]))
        is_qa = message_text(messages[0]).startswith("QA pair")
        if is_qa:
            history = [(q.strip(), a.strip()) for q, a in d.instance.history]
            stale = {"\n".join(history[k]) for k in stale_pairs(d.instance, d.variant)}
            wrong = text.strip() in stale
            fixed = f"{text.splitlines()[0]}\n{d.support_new}"
        else:
            wrong = d.support_old in text
            fixed = text.replace(d.support_old, d.support_new)
        last = message_text(messages[-1])
        if len(messages) == 1:  # u1: INCONSISTENT
            return f'"{d.support_old}" contradicts the correction.' if wrong else NO_MODIFICATION
        if last in (STORY_MODIFY_PROMPT, QA_MODIFY_PROMPT):
            return f"Here is the modified text, with the contradiction removed:\n{fixed}"
        assert last in (STORY_EXTRACT_PROMPT, QA_EXTRACT_PROMPT), last
        return fixed

    async def __call__(self, messages: Sequence[Message], *, purpose: str, **params: Any) -> dict[str, Any]:
        reply = self._reply(messages)
        limit = self.client_max_tokens or params["max_tokens"]
        words = reply.split(" ")
        cut = False
        while self.count(" ".join(words)) > limit:  # the server stops at max_tokens
            words, cut = words[:-1], True
        reply = " ".join(words)
        prompt, completion = chat_tokens(messages, self.count), self.count(reply)
        self.calls.append((purpose, prompt, completion, limit, cut))
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        return {"choices": [{"message": {"role": "assistant", "content": reply}}], "usage": usage}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from keproxy.memory.embeddings import Embedder

    instances = load_keic(args.data)[: args.limit or None]
    templates = [int(t) for t in args.templates.split(",")]
    dialogues = [
        build_dialogue(inst, v, t, arr)
        for inst in instances
        for v in range(min(args.variants, len(inst.support_new)))
        for t in templates
        for arr in args.arrangements.split(",")
    ]
    tokenizer, count = chat_tokenizer()
    detector = default_detector()
    backend = LLMBackend(EditorGeneration(), topic_gate=args.topic_gate)
    editor = DeletionEditor(
        backend, backend, locator=SpanLocator(Embedder.from_name_or_path(None)), generation=EditorGeneration()
    )
    model = ScriptedAppF(count, args.client_max_tokens)
    rows: list[dict[str, Any]] = []
    for d in dialogues:
        model.start(d)
        result = await editor.edit(d.messages, detector.detect(d.messages), EditContext(upstream=model))
        row = measure(d, result.messages, sum(c[1] for c in model.calls), count)
        row.update(
            id=d.instance.id, template=d.template, hmo=d.instance.history_mentions_old,
            calls=len(model.calls), completion_tokens=sum(c[2] for c in model.calls),
            cut=sum(c[4] for c in model.calls),
        )  # fmt: skip
        rows.append(row)
    otc = sum(r["otc_tokens"] for r in rows)
    deletion = sum(r["deletion_tokens"] for r in rows)
    hmo = [r for r in rows if r["hmo"]]
    summary = {
        "data": str(args.data),
        "tokenizer": tokenizer,
        "client_max_tokens": args.client_max_tokens,
        "topic_gate": args.topic_gate,
        "dialogues": len(rows),
        "history_mentions_old": len(hmo),
        "otc_tokens_mean": round(otc / len(rows), 1),
        "deletion_tokens_mean": round(deletion / len(rows), 1),
        "deletion_vs_otc": round(deletion / otc, 3),
        "completion_tokens_mean": round(statistics.fmean(r["completion_tokens"] for r in rows), 1),
        "calls_mean": round(statistics.fmean(r["calls"] for r in rows), 2),
        "replies_cut_at_max_tokens": sum(r["cut"] for r in rows),
        "cur": round(statistics.fmean(r["cur"] for r in rows), 3),
        "cur_ext": round(statistics.fmean(r["cur_ext"] for r in rows), 3),
        "cur_ext_hmo": round(statistics.fmean(r["cur_ext"] for r in hmo), 3) if hmo else None,
    }
    if args.rows:
        summary["rows"] = rows
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEV_SET)
    parser.add_argument("--templates", default="1,12")
    parser.add_argument("--variants", type=int, default=1)
    parser.add_argument("--arrangements", default="cba")
    parser.add_argument("--limit", type=int, default=15, help="first N instances only (0: all)")
    parser.add_argument(
        "--client-max-tokens",
        type=int,
        default=None,
        help="every call stops at this max_tokens instead of the editor's own (the behaviour before the editors "
        "had their own parameters: the KEIC harness's max_tokens=8 reached them)",
    )
    parser.add_argument(
        "--no-topic-gate",
        dest="topic_gate",
        action="store_false",
        help="ask App. F about every turn and whole messages (LLMBackend(topic_gate=False)), as before the gate",
    )
    parser.add_argument("--rows", action="store_true", help="keep every dialogue's row in the JSON")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    summary = asyncio.run(run(args))
    text = json.dumps(summary, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
