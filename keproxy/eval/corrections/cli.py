"""``keproxy eval corrections``: score correction detectors on a labelled file and print the tables.

:func:`eval_corrections_command` is a plain function with typer annotations, so it can be called directly
or registered as a typer command.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.console import Console
from rich.table import Table

from keproxy.corrections.detect import DetectorResources, build_detector
from keproxy.eval.corrections.data import load_corrections
from keproxy.eval.corrections.metrics import CorrectionsReport, score
from keproxy.eval.corrections.run import ItemPrediction, predict

__all__ = ["eval_corrections_command", "print_corrections_report", "report_tables"]

_NEEDS_NLI = frozenset({"contradiction"})


def _rate(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def report_tables(report: CorrectionsReport, title: str = "") -> list[Table]:
    """(overall + per style, span match, latency) tables of ``report``."""
    main = Table(title=f"Correction detection{f' — {title}' if title else ''}")
    for name in ("set", "n", "TP", "FP", "FN", "TN", "P", "R", "F1", "FPR"):
        main.add_column(name, justify="left" if name == "set" else "right")
    rows = [("overall", report.overall), *report.by_style.items()]
    for name, c in rows:
        main.add_row(
            name, str(c.n), str(c.tp), str(c.fp), str(c.fn), str(c.tn),
            _rate(c.precision), _rate(c.recall), _rate(c.f1), _rate(c.fpr),
        )  # fmt: skip
    main.caption = (
        f"look-alike FPR {_rate(report.lookalike_fpr)}, all-negative FPR {_rate(report.negative_fpr)}"
    )
    spans = Table(title="Span match on true positives (exact / token F1)")
    for name in ("set", "n", "old exact", "old F1", "new exact", "new F1", "old given"):
        spans.add_column(name, justify="left" if name == "set" else "right")
    for name, s in [("overall", report.spans), *report.spans_by_style.items()]:
        if s.n:
            spans.add_row(
                name, str(s.n), _rate(s.old_exact), _rate(s.old_f1), _rate(s.new_exact), _rate(s.new_f1),
                _rate(s.old_given),
            )  # fmt: skip
    latency = Table(title="Detection latency per request (ms)")
    for name in ("mean", "p50", "p95", "max"):
        latency.add_column(name, justify="right")
    if report.latency_ms:
        latency.add_row(*(f"{report.latency_ms[k]:.1f}" for k in ("mean", "p50", "p95", "max")))
    return [main, spans, latency]


def print_corrections_report(report: CorrectionsReport, console: Console, title: str = "") -> None:
    """Print :func:`report_tables` to ``console``."""
    for table in report_tables(report, title):
        console.print(table)


def _write(
    out: Path, detectors: Sequence[str], report: CorrectionsReport, predictions: Sequence[ItemPrediction]
) -> None:
    payload: Mapping[str, object] = {
        "detectors": list(detectors),
        "summary": report.to_dict(),
        "items": [p.to_dict() for p in predictions],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(orjson.dumps(payload, option=orjson.OPT_INDENT_2))


def eval_corrections_command(
    data: Annotated[Path, typer.Option(help="Corrections JSONL (shared/data/corrections schema).")],
    detectors: Annotated[
        str, typer.Option(help="Comma-separated detectors, combined in this order.")
    ] = "template,cue,contradiction",
    out: Annotated[Path | None, typer.Option(help="Write summary and per-item predictions as JSON.")] = None,
    nli: Annotated[str, typer.Option(help="NLI backend for the contradiction detector.")] = "local",
    contradiction_threshold: Annotated[
        float | None, typer.Option(help="p(contradiction) threshold; default: the detector's.")
    ] = None,
) -> CorrectionsReport:
    """Score the detectors on ``data``: P/R/F1 overall and per style, look-alike FPR, span match, latency.

    Exits with code 2 on an unknown detector, a bad data file or an NLI backend that cannot load.
    """
    console, errors = Console(), Console(stderr=True)
    names = [n.strip() for n in detectors.split(",") if n.strip()]
    try:
        items = load_corrections(data)
    except (OSError, ValueError) as exc:
        errors.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    options = {} if contradiction_threshold is None else {"threshold": contradiction_threshold}
    resources = DetectorResources(nli_name=nli, contradiction=options)
    if _NEEDS_NLI & set(names):
        from keproxy.nli import get_nli_backend

        try:
            backend = get_nli_backend(nli)
        except Exception as exc:
            errors.print(f"[red]error:[/red] NLI backend {nli!r} cannot be loaded: {exc}")
            raise typer.Exit(2) from None
        resources = DetectorResources(nli=backend, nli_name=nli, contradiction=options)
    try:
        detector = build_detector(names, resources)
    except (KeyError, ValueError) as exc:
        errors.print(f"[red]error:[/red] {exc.args[0]}")
        raise typer.Exit(2) from None
    if items:  # warm up (model loading is not detection latency)
        detector.detect(
            [{"role": "assistant", "content": "It is 5."}, {"role": "user", "content": "It is 6."}]
        )
    predictions = predict(items, detector)
    report = score(predictions)
    print_corrections_report(report, console, title=",".join(names))
    if out is not None:
        _write(out, names, report, predictions)
        errors.print(f"wrote {out}")
    return report
