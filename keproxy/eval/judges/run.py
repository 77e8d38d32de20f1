"""``keproxy eval judges``: every judge (an NLI backend spec) decides every row of the judge validation set
under every rule (:data:`keproxy.eval.judges.metrics.RULES`); agreement with the hand labels overall, per label,
per edit kind, per length and for the hard cases, written to the output folder (:mod:`.report`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from keproxy.eval.judges.data import JudgeLabel, JudgeRow, load_judge_set
from keproxy.eval.judges.metrics import (
    RULES,
    Agreement,
    PremiseJudgement,
    agreement,
    agreement_by,
    judge_pairs,
)
from keproxy.nli import get_nli_backend
from keproxy.nli.base import NLIBackend

__all__ = ["JudgeResult", "JudgesReport", "judge_rows", "run_judges_eval"]


@dataclass(frozen=True)
class JudgeResult:
    """One judge under one rule: its label per row (in the set's order) and its agreement overall
    (``overall``), per edit kind (``by_kind``), per length bucket (``by_length``) and on the hard cases.
    ``seconds``: wall time of the judge's whole batch (all rules together), model loading included."""

    judge: str
    rule: str
    labels: tuple[JudgeLabel, ...]
    overall: Agreement
    by_kind: dict[str, Agreement]
    by_length: dict[str, Agreement]
    hard: Agreement
    seconds: float


@dataclass
class JudgesReport:
    """Every (judge, rule) result, the rows judged, and per judge the premise judgements of each row."""

    rows: list[JudgeRow]
    results: list[JudgeResult] = field(default_factory=list)
    premises: dict[str, list[list[PremiseJudgement]]] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)

    def predictions(self) -> list[dict[str, Any]]:
        """One JSON-ready record per row: id, hand label, edit kind, length, hard, and per judge the label of
        each rule and the NLI probabilities (entailment, neutral, contradiction) of each premise asked."""
        records = []
        for i, row in enumerate(self.rows):
            judges: dict[str, Any] = {}
            for result in self.results:
                entry = judges.setdefault(result.judge, {"labels": {}, "premises": []})
                entry["labels"][result.rule] = result.labels[i]
            for judge, details in self.premises.items():
                judges[judge]["premises"] = [
                    {"premise": p.premise, "top": p.top, "probs": [round(x, 4) for x in p.probs]}
                    for p in details[i]
                ]
            records.append(
                {"id": row.id, "label": row.label, "edit_kind": row.edit_kind, "length": row.length,
                 "hard": row.hard, "edit": row.edit, "text": row.text, "judges": judges}
            )  # fmt: skip
        return records


def judge_rows(judge: str, nli: NLIBackend, rows: Sequence[JudgeRow]) -> tuple[list[JudgeResult], list[Any]]:
    """Every rule's :class:`JudgeResult` for ``nli`` (named ``judge``) on ``rows``, and the premise judgements
    per row (see :func:`keproxy.eval.judges.metrics.judge_pairs`)."""
    start = time.perf_counter()
    labels, details = judge_pairs(nli, [(row.text, row.edit) for row in rows], RULES)
    seconds = time.perf_counter() - start
    gold = [row.label for row in rows]
    hard = [i for i, row in enumerate(rows) if row.hard]
    results = [
        JudgeResult(
            judge=judge,
            rule=rule,
            labels=tuple(judged),
            overall=agreement(gold, judged),
            by_kind=agreement_by([row.edit_kind for row in rows], gold, judged),
            by_length=agreement_by([row.length for row in rows], gold, judged),
            hard=agreement([gold[i] for i in hard], [judged[i] for i in hard]),
            seconds=seconds,
        )
        for rule, judged in labels.items()
    ]
    return results, details


def run_judges_eval(
    judges: Sequence[str],
    *,
    data: Path | None = None,
    limit: int | None = None,
    out: Path = Path("results/judges"),
    plots: bool = True,
    log: Callable[[str], object] = lambda _: None,
    backends: dict[str, NLIBackend] | None = None,
) -> JudgesReport:
    """Judge the set at ``data`` (default: the packaged set; the first ``limit`` rows) with each spec in
    ``judges`` ("local", "hf:<name>", "llm:<model>", see :func:`keproxy.nli.get_nli_backend`) and write
    ``judges.md``, ``predictions.json``, ``summary.json`` and (``plots``) ``judges.png`` into ``out``.

    ``backends``: spec -> a ready backend used instead of building one (tests). Raises FileNotFoundError /
    ValueError on a missing or malformed set, NLIConfigError on a bad spec or a missing local model,
    UpstreamError when an LLM judge's call fails (no key, no network).
    """
    from keproxy.eval.judges.report import write_outputs

    rows = load_judge_set(data, limit=limit)
    if not judges:
        raise ValueError("name at least one judge (--judge local, hf:<name> or llm:<model>)")
    report = JudgesReport(rows)
    for spec in judges:
        nli = (backends or {}).get(spec) or get_nli_backend(spec)
        log(f"judging {len(rows)} rows with {spec}")
        results, details = judge_rows(spec, nli, rows)
        report.results += results
        report.premises[spec] = details
    out.mkdir(parents=True, exist_ok=True)
    report.files = write_outputs(report, out, plots=plots)
    return report
