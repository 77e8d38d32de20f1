"""Extended context-update rate (CUR) and cost per strategy.

The skeleton CUR (:func:`keproxy.eval.keic.metrics.context_updated`) asks that ``support_old`` be gone from every
forwarded message but the correction turn and that the story turn hold ``support_new``. It cannot see a Q/A turn
that *implies* the old fact without quoting it ("How many times did Grandma Fern rest?" – "Twice."). The
extended CUR adds, for instances flagged ``history_mentions_old``: every forwarded Q/A turn that still states the
old fact must have been rewritten or removed. A Q/A turn (a user message and the assistant reply after it)
states the old fact when it contains ``support_old`` (outside ``support_new``), or when the NLI backend finds
it contradicts ``support_new`` (premise ``support_new``, hypothesis "question answer"; P(contradiction) at or
above a threshold). Not judged: the story turn, the correction turn (its text equals the correction
utterance) and any turn asking the test question. Instances without the flag keep the skeleton criterion.

:func:`cur_table` reports, per (strategy, arrangement): skeleton and extended CUR, extended CUR per template
group (1-9 quote old and new knowledge, 10-15 only the new, KEIC App. B.2) and per instance flag
(``history_mentions_old``, ``propagation``), and the cost columns of KEIC Table 1: the conversation flow, input
tokens and upstream calls per dialogue, and input tokens ÷ OTC input tokens on the same dialogues.
"""

from __future__ import annotations

import csv
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from keproxy.eval.core.metrics import rate
from keproxy.eval.core.tables import markdown_table, percent
from keproxy.eval.keic.data import Dialogue
from keproxy.eval.keic.metrics import RunResult, _mentions, context_updated
from keproxy.messages import message_text
from keproxy.nli.base import LABELS, NLIBackend

__all__ = [
    "CUR_CSV_COLUMNS",
    "TEMPLATE_GROUPS",
    "CurRow",
    "QATurn",
    "StalenessJudge",
    "cur_markdown",
    "cur_table",
    "extended_cur",
    "flow",
    "qa_turns",
    "write_cur_csv",
]

#: Template group -> template numbers (KEIC App. B.2; §5 "Transferability of correction phase").
TEMPLATE_GROUPS: dict[str, tuple[int, ...]] = {
    "old+new": tuple(range(1, 10)),
    "new-only": tuple(range(10, 16)),
}

_CONTRADICTION = LABELS.index("contradiction")

# KEIC Table 1 conversation flows, by strategy, then arrangement; "*" marks phases the proxy edits.
_FLOWS: dict[str, dict[str, str]] = {
    "otc": {"cam": "T_f T_c T_o T_i", "cba": "T_f T_o T_c T_i", "cim": "T_f T_o T_c T_o T_i"},
    "verification": {
        "cam": "T_f T_c T_o T_i T_v",
        "cba": "T_f T_o T_c T_i T_v",
        "cim": "T_f T_o T_c T_o T_i T_v",
    },
    "reiterate": {
        "cam": "T_f T_c T_r T_o T_i",
        "cba": "T_f T_o T_c T_r T_i",
        "cim": "T_f T_o T_c T_r T_o T_i",
    },
    "reiterate-oracle": {
        "cam": "T_f T_c T_r* T_o T_i",
        "cba": "T_f T_o T_c T_r* T_i",
        "cim": "T_f T_o T_c T_r* T_o T_i",
    },
    "patch": {"cam": "T_f* T_c T_o* T_i", "cba": "T_f* T_o* T_c T_i", "cim": "T_f* T_o* T_c T_o* T_i"},
    "deletion": {"cam": "T_f* T_c T_o* T_i", "cba": "T_f* T_o* T_c T_i", "cim": "T_f* T_o* T_c T_o* T_i"},
    "baseline": {"none": "T_f' T_o T_i"},
}


def flow(strategy: str, arrangement: str) -> str:
    """The KEIC Table 1 conversation flow of ``strategy`` in ``arrangement`` ("" when not known)."""
    return _FLOWS.get(strategy, {}).get(arrangement, "")


@dataclass(frozen=True)
class QATurn:
    """One judged Q/A turn of a forwarded history: the user message at ``index``, the reply after it, and
    their texts joined by a space (``text``)."""

    index: int
    text: str


def qa_turns(forwarded_messages: Sequence[Mapping[str, Any]], dialogue: Dialogue) -> list[QATurn]:
    """The Q/A turns of ``forwarded_messages`` to judge: each user message directly followed by an assistant
    message, except the first user message (the story), the correction turn and the test question."""
    correction = dialogue.correction.strip()
    question = dialogue.instance.test_question.strip()
    turns: list[QATurn] = []
    first_user = next((i for i, m in enumerate(forwarded_messages) if m.get("role") == "user"), None)
    for i in range(len(forwarded_messages) - 1):
        user, reply = forwarded_messages[i], forwarded_messages[i + 1]
        if user.get("role") != "user" or reply.get("role") != "assistant" or i == first_user:
            continue
        text = message_text(user).strip()
        if text in (correction, question):
            continue
        turns.append(QATurn(i, f"{text} {message_text(reply).strip()}"))
    return turns


class StalenessJudge:
    """Finds forwarded Q/A turns that still state the old fact (see the module docstring).

    nli: the NLI backend (``keproxy.nli.NLIBackend``), or None to judge by ``support_old`` string presence only.
    threshold: P(contradiction) at or above which a turn counts as stating the old fact.
    batch_size: pairs per ``nli.predict`` call. Identical (premise, hypothesis) pairs are judged once per judge,
    across calls (the verdicts are remembered on the instance).
    """

    def __init__(self, nli: NLIBackend | None, threshold: float = 0.5, batch_size: int = 64) -> None:
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        self.nli = nli
        self.threshold = threshold
        self.batch_size = batch_size
        self._verdicts: dict[tuple[str, str], bool] = {}

    def _contradicted(self, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], bool]:
        if self.nli is None:
            return {}
        unique = [p for p in dict.fromkeys(pairs) if p not in self._verdicts]
        for start in range(0, len(unique), self.batch_size):
            chunk = unique[start : start + self.batch_size]
            probs = np.asarray(self.nli.predict(chunk), dtype=np.float32)
            if probs.shape != (len(chunk), len(LABELS)):
                raise ValueError(f"NLI backend returned shape {probs.shape}, expected ({len(chunk)}, 3)")
            for pair, p in zip(chunk, probs[:, _CONTRADICTION], strict=True):
                self._verdicts[pair] = bool(p >= self.threshold)
        return self._verdicts

    def judge(self, items: Sequence[tuple[Sequence[Mapping[str, Any]], Dialogue]]) -> list[list[int]]:
        """For each (forwarded messages, dialogue): the indices of the user messages of its stale Q/A turns.

        All items are judged in one batched pass; the result is in ``items`` order.
        """
        turns = [qa_turns(messages, dialogue) for messages, dialogue in items]
        pairs = [(d.support_new, t.text) for (_, d), ts in zip(items, turns, strict=True) for t in ts]
        verdict = self._contradicted(pairs)
        out: list[list[int]] = []
        for (_, d), ts in zip(items, turns, strict=True):
            stale = [
                t.index
                for t in ts
                if _mentions(t.text, d.support_old, d.support_new)
                or verdict.get((d.support_new, t.text), False)
            ]
            out.append(stale)
        return out


def extended_cur(
    forwarded_messages: Sequence[Mapping[str, Any]], dialogue: Dialogue, stale_turns: Sequence[int]
) -> bool:
    """The extended CUR criterion: :func:`context_updated`, and for ``history_mentions_old`` instances no stale
    Q/A turn (``stale_turns`` from :meth:`StalenessJudge.judge`)."""
    if not context_updated(forwarded_messages, dialogue):
        return False
    return not (dialogue.instance.history_mentions_old and stale_turns)


# --- the table -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CurRow:
    """CUR and cost of one (strategy, arrangement); rates in [0, 1], None when no dialogue falls in the group.

    cur: skeleton CUR. cur_ext: extended CUR (None when not judged). cur_old_new / cur_new_only: extended CUR
    (skeleton when not judged) on templates 1-9 / 10-15. cur_hmo / cur_no_hmo: on instances with / without
    ``history_mentions_old``; cur_prop / cur_no_prop: with / without ``propagation``. input_tokens: mean per
    dialogue; tokens_vs_otc: mean input tokens ÷ mean OTC input tokens on the same dialogues (same instance,
    variant, template, arrangement, run; for the baseline: same instance, variant, run). upstream_calls: mean
    per dialogue. n: dialogues x runs.
    """

    strategy: str
    arrangement: str
    flow: str
    n: int
    cur: float
    cur_ext: float | None
    cur_old_new: float | None
    cur_new_only: float | None
    cur_hmo: float | None
    cur_no_hmo: float | None
    cur_prop: float | None
    cur_no_prop: float | None
    input_tokens: float | None
    tokens_vs_otc: float | None
    upstream_calls: float


#: Columns of ``cur.csv`` (the fields of :class:`CurRow`).
CUR_CSV_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(CurRow))


def _mean(values: Iterable[float | int | None]) -> float | None:
    rows = [float(v) for v in values if v is not None]
    return statistics.fmean(rows) if rows else None


def _updated(r: RunResult) -> bool:
    return r.cur if r.cur_ext is None else r.cur_ext


def cur_table(results: Sequence[RunResult], reference: str = "otc") -> list[CurRow]:
    """One :class:`CurRow` per (strategy, arrangement) of ``results``, in first-seen order.

    reference: the strategy whose input tokens are the denominator of ``tokens_vs_otc``.
    """
    cells: dict[tuple[str, str], list[RunResult]] = defaultdict(list)
    for r in results:
        cells[(r.strategy, r.arrangement)].append(r)
    ref_full: dict[tuple[str, int, int, str, int], int] = {}
    ref_unit: dict[tuple[str, int, int], list[int]] = defaultdict(list)
    for r in results:
        if r.strategy == reference and r.input_tokens is not None:
            ref_full[(r.instance_id, r.variant, r.template, r.arrangement, r.run)] = r.input_tokens
            ref_unit[(r.instance_id, r.variant, r.run)].append(r.input_tokens)

    rows: list[CurRow] = []
    for (strategy, arrangement), rs in cells.items():
        judged = [r.cur_ext for r in rs if r.cur_ext is not None]
        own: list[int] = []
        ref: list[float] = []
        for r in rs:
            if r.input_tokens is None:
                continue
            full = ref_full.get((r.instance_id, r.variant, r.template, r.arrangement, r.run))
            unit = ref_unit.get((r.instance_id, r.variant, r.run))
            if full is not None:
                own.append(r.input_tokens)
                ref.append(full)
            elif unit:
                own.append(r.input_tokens)
                ref.append(statistics.fmean(unit))
        ratio = sum(own) / sum(ref) if ref and sum(ref) > 0 else None
        rows.append(
            CurRow(
                strategy=strategy,
                arrangement=arrangement,
                flow=flow(strategy, arrangement),
                n=len(rs),
                cur=rate(r.cur for r in rs) or 0.0,
                cur_ext=rate(judged) if len(judged) == len(rs) else None,
                cur_old_new=rate(_updated(r) for r in rs if r.template in TEMPLATE_GROUPS["old+new"]),
                cur_new_only=rate(_updated(r) for r in rs if r.template in TEMPLATE_GROUPS["new-only"]),
                cur_hmo=rate(_updated(r) for r in rs if r.history_mentions_old),
                cur_no_hmo=rate(_updated(r) for r in rs if not r.history_mentions_old),
                cur_prop=rate(_updated(r) for r in rs if r.propagation),
                cur_no_prop=rate(_updated(r) for r in rs if not r.propagation),
                input_tokens=_mean(r.input_tokens for r in rs),
                tokens_vs_otc=ratio,
                upstream_calls=_mean(r.upstream_calls for r in rs) or 0.0,
            )
        )
    return rows


_COST_HEAD = ("Strategy", "Setting", "Flow", "# Input tokens per dialogue", "× OTC", "# Upstream calls per dialogue",
              "n")  # fmt: skip
_CUR_HEAD = ("Strategy", "Setting", "CUR", "CUR+", "T1–9 (old+new)", "T10–15 (new only)", "history mentions old",
             "no mention", "propagation", "no propagation")  # fmt: skip


def cur_markdown(rows: Sequence[CurRow]) -> str:
    """Two markdown tables: cost in KEIC Table 1's layout (flow, input tokens and upstream calls per dialogue,
    × OTC) and CUR (skeleton, extended, per template group and instance flag), in percent."""
    cost = [
        [r.strategy, r.arrangement.upper(), r.flow or "–",
         "–" if r.input_tokens is None else f"{r.input_tokens:,.0f}",
         "–" if r.tokens_vs_otc is None else f"{r.tokens_vs_otc:.2f}x", f"{r.upstream_calls:.2f}", str(r.n)]
        for r in rows
    ]  # fmt: skip
    cur = [
        [r.strategy, r.arrangement.upper(), *map(percent, (r.cur, r.cur_ext, r.cur_old_new, r.cur_new_only,
                                                           r.cur_hmo, r.cur_no_hmo, r.cur_prop, r.cur_no_prop))]
        for r in rows
    ]  # fmt: skip
    return (
        "Cost per dialogue (KEIC Table 1 columns; input tokens include the editors' upstream calls):\n\n"
        + markdown_table(_COST_HEAD, cost, left=3)
        + "\nContext-update rate, % (CUR: the old fact is gone from the forwarded history; CUR+: also no Q/A turn "
        "still states it, judged on `history_mentions_old` instances; groups and flags use CUR+):\n\n"
        + markdown_table(_CUR_HEAD, cur, left=2)
    )


def write_cur_csv(rows: Sequence[CurRow], path: str | Path) -> None:
    """Write ``rows`` as CSV with :data:`CUR_CSV_COLUMNS`; rates in [0, 1], missing values empty."""
    with Path(path).open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(CUR_CSV_COLUMNS))
        writer.writeheader()
        for r in rows:
            writer.writerow({c: ("" if getattr(r, c) is None else getattr(r, c)) for c in CUR_CSV_COLUMNS})
