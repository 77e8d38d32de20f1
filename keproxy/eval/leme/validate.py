"""``keproxy eval leme-agreement``: LEME's claim classifier (an NLI backend under each rule of
:data:`keproxy.eval.leme.metrics.CLAIM_RULES`) over LEME's 1,642 human annotations
(:mod:`keproxy.eval.leme.annotations`), with its agreement with the human labels overall, per premise kind
(whole passages, highlighted evidence sentences), claim kind and passage writer (:mod:`.agreement`).

Outputs in ``out``: ``agreement.md`` (the tables, with the paper's Table 9 rows beside them),
``summary.json`` (every figure) and ``predictions.csv`` (one line per annotation and rule).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from keproxy.eval.core.outputs import RunOutputs
from keproxy.eval.core.tables import markdown_table, percent
from keproxy.eval.leme.agreement import ClaimAgreement, agreement_by, claim_agreement
from keproxy.eval.leme.annotations import PREMISE_KINDS, LemeAnnotation, load_annotations
from keproxy.eval.leme.metrics import CLAIM_RULES, claim_labels

__all__ = ["PAPER_ROWS", "RuleResult", "ValidationReport", "agreement_markdown", "run_leme_agreement"]

#: LEME Table 9 (annotation task: α, accuracy vs the humans) and App. I's zero-shot NLI baseline; the trained
#: DeBERTaV3-large is scored on a 20% test split of the annotations it was trained on (80%).
PAPER_ROWS: tuple[tuple[str, float, float], ...] = (
    ("DeBERTaV3-large fine-tuned on 80% of the annotations (20% test split)", 0.80, 0.85),
    ("GPT-4, 8-shot", 0.61, 0.72),
    ("GPT-4, zero-shot", 0.57, 0.69),
    ("zero-shot NLI (DeBERTaV3-base, MNLI/FEVER/ANLI), App. I", 0.53, 0.65),
    ("GPT-3.5, zero-shot", 0.45, 0.54),
    ("llama2-7b-chat, zero-shot", -0.03, 0.42),
)
#: LEME Table 2: the human labels' distribution as the paper reports it.
PAPER_DISTRIBUTION = {"supports": 0.41, "neutral": 0.37, "contradicts": 0.22}


@dataclass(frozen=True)
class RuleResult:
    """One judge under one rule: its label per annotation (in CSV order), its agreement overall and per
    premise kind (``passage`` / ``evidence``), claim kind and passage writer. ``seconds``: wall time of the
    judge's batch (all rules together, model loading included)."""

    judge: str
    rule: str
    labels: tuple[str, ...]
    overall: ClaimAgreement
    by_premise: dict[str, ClaimAgreement]
    by_claim: dict[str, ClaimAgreement]
    by_method: dict[str, ClaimAgreement]
    seconds: float


@dataclass
class ValidationReport:
    """The annotations judged and every (judge, rule) result."""

    rows: list[LemeAnnotation]
    results: list[RuleResult] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _shares(a: ClaimAgreement, human: bool = False) -> str:
    share = a.human_share if human else a.predicted_share
    return " / ".join(percent(share(label)) for label in ClaimAgreement.LABELS)


def agreement_markdown(results: Sequence[RuleResult]) -> str:
    """Markdown: per (judge, rule) and premise kind, accuracy, α, precision / recall per label and the label
    distribution predicted vs human; accuracy per claim kind and writer; the paper's rows; each confusion."""
    head = ["judge", "rule", "premises", "n", "accuracy", "α",
            *(f"{label} P / R" for label in ClaimAgreement.LABELS),
            "predicted S / N / C", "human S / N / C", "seconds"]  # fmt: skip
    lines = []
    for r in results:
        for kind, a in [
            ("all", r.overall),
            *((k, r.by_premise[k]) for k in PREMISE_KINDS if k in r.by_premise),
        ]:
            lines.append(
                [r.judge, r.rule, kind, str(a.n), percent(a.accuracy), _num(a.alpha),
                 *(f"{percent(a.precision(lab))} / {percent(a.recall(lab))}" for lab in ClaimAgreement.LABELS),
                 _shares(a), _shares(a, human=True), f"{r.seconds:.0f}"]
            )  # fmt: skip
    claims = sorted({k for r in results for k in r.by_claim})
    methods = sorted({k for r in results for k in r.by_method})
    slices = markdown_table(
        ["judge", "rule", *(f"claim: {k}" for k in claims), *(f"writer: {m}" for m in methods)],
        ([r.judge, r.rule,
          *(f"{percent(r.by_claim[k].accuracy)} ({r.by_claim[k].n})" if k in r.by_claim else "–" for k in claims),
          *(f"{percent(r.by_method[m].accuracy)} ({r.by_method[m].n})" if m in r.by_method else "–" for m in methods)]
         for r in results),
        left=2,
    )  # fmt: skip
    paper = markdown_table(
        ["LEME (Rosati et al., 2024, Table 9 / App. I)", "α", "accuracy"],
        ([name, f"{alpha:.2f}", percent(acc)] for name, alpha, acc in PAPER_ROWS),
        left=1,
    )
    parts = [
        "Agreement with LEME's human labels (%; α: Krippendorff's, nominal; S / N / C: supports / neutral / "
        "contradicts)\n\n" + markdown_table(head, lines, left=3),
        "Accuracy per claim kind and passage writer (%, rows in brackets)\n\n" + slices,
        "The paper's classifiers on the same annotations (human inter-annotator α 0.63 / 0.65; human labels "
        "S / N / C " + " / ".join(percent(v) for v in PAPER_DISTRIBUTION.values()) + ", Table 2)\n\n" + paper,
    ]
    for r in results:
        for kind, a in [
            ("all", r.overall),
            *((k, r.by_premise[k]) for k in PREMISE_KINDS if k in r.by_premise),
        ]:
            confusion = markdown_table(
                ["human \\ judge", *ClaimAgreement.LABELS],
                ([h, *map(str, row)] for h, row in zip(ClaimAgreement.LABELS, a.confusion, strict=True)),
                left=1,
            )
            parts.append(f"Confusion of {r.judge} ({r.rule}, premises: {kind})\n\n{confusion}")
    return "\n".join(parts)


def judge_annotations(
    judge: str, nli: object, rows: Sequence[LemeAnnotation], rules: Sequence[str]
) -> list[RuleResult]:
    """Every rule's :class:`RuleResult` for the backend ``nli`` (named ``judge``) on ``rows``: one NLI batch."""
    start = time.perf_counter()
    labels = claim_labels(nli, [(row.premise, row.claim) for row in rows], rules)
    seconds = time.perf_counter() - start
    human = [row.label for row in rows]
    return [
        RuleResult(
            judge=judge,
            rule=rule,
            labels=tuple(predicted),
            overall=claim_agreement(human, predicted),
            by_premise=agreement_by([r.premise_kind for r in rows], human, predicted),
            by_claim=agreement_by([r.claim_kind for r in rows], human, predicted),
            by_method=agreement_by([r.method for r in rows], human, predicted),
            seconds=seconds,
        )
        for rule, predicted in labels.items()
    ]


def run_leme_agreement(
    judges: Sequence[str],
    *,
    rules: Sequence[str] = tuple(CLAIM_RULES),
    data: Path | None = None,
    limit: int | None = None,
    out: Path = Path("results/leme-agreement"),
    log: Callable[[str], object] = lambda _: None,
    backends: Mapping[str, object] | None = None,
) -> ValidationReport:
    """Judge LEME's annotations (``data``: the CSV, default the shared one; the first ``limit`` rows) with each
    NLI backend spec in ``judges`` ("local", "hf:<name>", "llm:<model>") under each of ``rules``, and write
    ``agreement.md``, ``summary.json`` and ``predictions.csv`` into ``out``.

    ``backends``: spec -> a ready backend used instead of building one (tests). Raises FileNotFoundError /
    ValueError on a missing or malformed CSV, ValueError on no judge or an unknown rule, NLIConfigError on a
    bad spec or a missing local model, UpstreamError when an LLM judge's call fails.
    """
    from keproxy.nli import get_nli_backend

    unknown = [r for r in rules if r not in CLAIM_RULES]
    if unknown or not rules:
        raise ValueError(f"unknown rule {', '.join(unknown) or '(none)'}; known: {', '.join(CLAIM_RULES)}")
    if not judges:
        raise ValueError("name at least one judge (--judge local, hf:<name> or llm:<model>)")
    rows = load_annotations(data, limit=limit)
    report = ValidationReport(rows)
    for spec in judges:
        nli = (backends or {}).get(spec) or get_nli_backend(spec)
        log(f"judging {len(rows)} LEME annotations with {spec} under {', '.join(rules)}")
        report.results += judge_annotations(spec, nli, rows, rules)
    out.mkdir(parents=True, exist_ok=True)
    files = RunOutputs(out)
    files.text("agreement.md", agreement_markdown(report.results))
    files.json(
        "summary.json",
        {"rows": len(rows), "results": [
            {"judge": r.judge, "rule": r.rule, "description": CLAIM_RULES[r.rule].description,
             "seconds": round(r.seconds, 1), "overall": r.overall.to_dict(),
             "by_premise": {k: a.to_dict() for k, a in r.by_premise.items()},
             "by_claim": {k: a.to_dict() for k, a in r.by_claim.items()},
             "by_method": {k: a.to_dict() for k, a in r.by_method.items()}}
            for r in report.results]},
        newline=True,
    )  # fmt: skip
    files.csv_rows(
        "predictions.csv",
        ("example_id", "premise_kind", "setting", "method", "human", "judge", "rule", "predicted"),
        ([row.example_id, row.premise_kind, row.setting, row.method, row.label, r.judge, r.rule, r.labels[i]]
         for r in report.results for i, row in enumerate(rows)),
    )  # fmt: skip
    report.files = files.files
    return report
