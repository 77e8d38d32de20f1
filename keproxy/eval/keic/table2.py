"""KEIC Table 2 scoring: update / no update / upper bound with top-K templates and majority voting.

Pure functions over scored answers (anything with the fields of :class:`Scored`, e.g.
:class:`keproxy.eval.keic.metrics.RunResult`). A *cell* is one (strategy, arrangement) column of Table 2; a *unit*
is one (instance, support_new variant) pair; each unit is answered once per template and run.

Two ways to vote, both reported as "Maj" (KEIC §4.3, Table 2 caption; ties give N/A):

``vote="templates"`` (default, the paper's reading). Templates are ranked by their update rate (the mean over
runs of the share of units they update). In each run, a unit's answer under the top-K templates is decided by
majority vote over those K templates (self-consistency over prompts, "top-K majority voting", KEIC §5 citing
Wang et al. 2023); Update / No Update are the shares of units whose vote is update / no update; the Upper
Bound is the share of units for which *any* of the top-K templates gives update (Table 2 caption). Each
statistic is computed per run; the table shows the mean and the sample standard deviation over runs. This is
the reading under which Table 2's K=3 update can exceed K=1 (OTC CBA 67.6 vs 67.2), which an average of
ranked per-template rates cannot do.

``vote="runs"``. Each (unit, template) answer is first decided by majority vote over the N runs. Templates are
ranked by the update rate of these voted answers; Update / No Update / N/A for top-K are the voted rates
averaged over the top-K templates; the Upper Bound is the share of units where any top-K template's voted
answer is update. Voting leaves one value per statistic, so the std shown is that of the same statistic
computed on each run's own answers (no voting).

With K=1 the Update equals the Upper Bound under either vote, as in Table 2. Rates are in [0, 1]; the markdown
and CSV writers print percentages with one (markdown) or two (CSV) decimals.
"""

from __future__ import annotations

import csv
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from keproxy.eval.core.tables import markdown_table
from keproxy.eval.keic.metrics import Outcome

__all__ = [
    "BASELINE",
    "PAPER_KS",
    "Scored",
    "Stat",
    "Table2Row",
    "Vote",
    "majority",
    "rank_templates",
    "score_table2",
    "table2_csv_columns",
    "table2_markdown",
    "write_baseline_csv",
    "write_table2_csv",
]

#: The K of Table 2 (top-K templates out of 15).
PAPER_KS: tuple[int, ...] = (1, 3, 5, 15)
#: Strategy label of the no-update-phase baseline (KEIC §4.4); its arrangement is "none", its template 0.
BASELINE = "baseline"

Vote = Literal["templates", "runs"]
_OUTCOMES: tuple[Outcome, Outcome, Outcome] = ("update", "no_update", "na")
_METRICS = (
    ("update", "Update (↑, Maj)"),
    ("no_update", "No Update (↓, Maj)"),
    ("upper_bound", "Upper Bound (↑)"),
)


class Scored(Protocol):
    """One scored answer: unit (instance_id, variant), template, cell (strategy, arrangement), run."""

    @property
    def instance_id(self) -> str: ...
    @property
    def variant(self) -> int: ...
    @property
    def template(self) -> int: ...
    @property
    def strategy(self) -> str: ...
    @property
    def arrangement(self) -> str: ...
    @property
    def run(self) -> int: ...
    @property
    def outcome(self) -> Outcome: ...


@dataclass(frozen=True)
class Stat:
    """A rate in [0, 1]: mean over runs and sample std over runs (None with fewer than two runs)."""

    mean: float
    std: float | None

    @classmethod
    def of(cls, values: Sequence[float]) -> Stat:
        if not values:
            return cls(0.0, None)
        return cls(statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None)

    def percent(self) -> str:
        """ "51.5 (1.5)", or "51.5" without a std."""
        text = f"{100 * self.mean:.1f}"
        return text if self.std is None else f"{text} ({100 * self.std:.1f})"


@dataclass(frozen=True)
class Table2Row:
    """One (strategy, arrangement, K) entry of Table 2.

    templates: the top-K templates, best first. n_units: (instance, variant) pairs; n_runs: runs seen.
    """

    strategy: str
    arrangement: str
    k: int
    templates: tuple[int, ...]
    update: Stat
    no_update: Stat
    na: Stat
    upper_bound: Stat
    n_units: int
    n_runs: int


def majority(outcomes: Iterable[Outcome]) -> Outcome:
    """The most frequent of "update" / "no_update" / "na"; a tie for the top count (or no vote) gives "na"."""
    counts = {o: 0 for o in _OUTCOMES}
    for outcome in outcomes:
        counts[outcome] += 1
    best = max(counts.values())
    winners = [o for o in _OUTCOMES if counts[o] == best]
    return winners[0] if best > 0 and len(winners) == 1 else "na"


# labels[run][unit][template] -> outcome
_Unit = tuple[str, int]
_Labels = dict[int, dict[_Unit, dict[int, Outcome]]]


def _share(labels: Iterable[Outcome], value: Outcome) -> float:
    rows = list(labels)
    return sum(o == value for o in rows) / len(rows) if rows else 0.0


def _template_rate(by_unit: Mapping[_Unit, Mapping[int, Outcome]], template: int, value: Outcome) -> float:
    return _share((t[template] for t in by_unit.values() if template in t), value)


def _voted_over_runs(labels: _Labels) -> dict[_Unit, dict[int, Outcome]]:
    votes: dict[_Unit, dict[int, list[Outcome]]] = defaultdict(lambda: defaultdict(list))
    for by_unit in labels.values():
        for unit, by_template in by_unit.items():
            for template, outcome in by_template.items():
                votes[unit][template].append(outcome)
    return {u: {t: majority(v) for t, v in by_t.items()} for u, by_t in votes.items()}


def rank_templates(labels: _Labels, vote: Vote = "templates") -> list[int]:
    """Templates best first by update rate (ties: lower template number first); see the module docstring."""
    templates = sorted({t for by_unit in labels.values() for by_t in by_unit.values() for t in by_t})
    if vote == "runs":
        voted = _voted_over_runs(labels)
        score = {t: _template_rate(voted, t, "update") for t in templates}
    else:
        score = {
            t: statistics.fmean(_template_rate(by_unit, t, "update") for by_unit in labels.values())
            for t in templates
        }
    return sorted(templates, key=lambda t: (-score[t], t))


def _vote_over_templates(
    by_unit: Mapping[_Unit, Mapping[int, Outcome]], top: Sequence[int]
) -> dict[str, float]:
    """update / no_update / na shares of the per-unit majority over ``top``, and the any-update upper bound."""
    voted = [majority(by_t[t] for t in top if t in by_t) for by_t in by_unit.values()]
    bound = [any(by_t.get(t) == "update" for t in top) for by_t in by_unit.values()]
    n = len(bound)
    out: dict[str, float] = {o: _share(voted, o) for o in _OUTCOMES}
    out["upper_bound"] = sum(bound) / n if n else 0.0
    return out


def _average_over_templates(
    by_unit: Mapping[_Unit, Mapping[int, Outcome]], top: Sequence[int]
) -> dict[str, float]:
    """update / no_update / na rates averaged over ``top``, and the any-update upper bound."""
    out: dict[str, float] = {
        o: statistics.fmean(_template_rate(by_unit, t, o) for t in top) for o in _OUTCOMES
    }
    bound = [any(by_t.get(t) == "update" for t in top) for by_t in by_unit.values()]
    out["upper_bound"] = sum(bound) / len(bound) if bound else 0.0
    return out


def _score_cell(
    labels: _Labels, ks: Sequence[int], vote: Vote
) -> list[tuple[int, tuple[int, ...], dict[str, Stat]]]:
    ranking = rank_templates(labels, vote)
    runs = sorted(labels)
    out = []
    for k in sorted({min(k, len(ranking)) for k in ks if k >= 1}):
        top = tuple(ranking[:k])
        if vote == "runs":
            voted = _average_over_templates(_voted_over_runs(labels), top)
            per_run = [_average_over_templates(labels[r], top) for r in runs]
            stats = {
                name: Stat(voted[name], Stat.of([p[name] for p in per_run]).std)
                for name in (*_OUTCOMES, "upper_bound")
            }
        else:
            per_run = [_vote_over_templates(labels[r], top) for r in runs]
            stats = {name: Stat.of([p[name] for p in per_run]) for name in (*_OUTCOMES, "upper_bound")}
        out.append((k, top, stats))
    return out


def score_table2(
    results: Iterable[Scored], ks: Sequence[int] | None = None, vote: Vote = "templates"
) -> list[Table2Row]:
    """Table 2 rows for every (strategy, arrangement) cell of ``results``, in first-seen cell order, K ascending.

    ks: the K to report (default :data:`PAPER_KS`); each K is capped at the cell's number of templates and
    duplicates dropped (templates 1-5 only: K = 1, 3, 5). The baseline cell (one template, 0) has K = 1 only.
    A unit missing a template in some run votes with the templates it has. Raises ValueError on a bad vote.
    """
    if vote not in ("templates", "runs"):
        raise ValueError(f"vote must be 'templates' or 'runs', got {vote!r}")
    cells: dict[tuple[str, str], _Labels] = {}
    for r in results:
        labels = cells.setdefault((r.strategy, r.arrangement), defaultdict(lambda: defaultdict(dict)))
        labels[r.run][(r.instance_id, r.variant)][r.template] = r.outcome
    rows: list[Table2Row] = []
    for (strategy, arrangement), labels in cells.items():
        n_units = len({u for by_unit in labels.values() for u in by_unit})
        for k, top, stats in _score_cell(labels, ks or PAPER_KS, vote):
            rows.append(
                Table2Row(
                    strategy=strategy,
                    arrangement=arrangement,
                    k=k,
                    templates=top,
                    update=stats["update"],
                    no_update=stats["no_update"],
                    na=stats["na"],
                    upper_bound=stats["upper_bound"],
                    n_units=n_units,
                    n_runs=len(labels),
                )
            )
    return rows


# --- rendering ---------------------------------------------------------------------------------------------


def _order(values: Iterable[str], preferred: Sequence[str] | None) -> list[str]:
    seen = list(dict.fromkeys(values))
    if not preferred:
        return seen
    return [v for v in preferred if v in seen] + [v for v in seen if v not in preferred]


def _grid(
    rows: Sequence[Table2Row], strategies: Sequence[str] | None, arrangements: Sequence[str] | None
) -> tuple[list[str], list[str], dict[tuple[str, str, int], Table2Row]]:
    main = [r for r in rows if r.strategy != BASELINE]
    strats = _order((r.strategy for r in main), strategies)
    arrs = _order((r.arrangement for r in main), arrangements)
    return strats, arrs, {(r.strategy, r.arrangement, r.k): r for r in main}


def table2_markdown(
    rows: Sequence[Table2Row],
    strategies: Sequence[str] | None = None,
    arrangements: Sequence[str] | None = None,
) -> str:
    """Markdown in Table 2's layout: one line per (setting, K), column groups Update / No Update / Upper Bound
    with one column per strategy, cells "mean (std)" in percent; then the no-update-phase baseline (when present)
    and the top-K templates of each cell. "–" marks a missing cell."""
    strats, arrs, by_key = _grid(rows, strategies, arrangements)
    header = ["Setting", "K"] + [f"{title.split(' (')[0]} {s}" for _, title in _METRICS for s in strats]
    body: list[list[str]] = []
    for arrangement in arrs:
        ks = sorted({k for (_, a, k) in by_key if a == arrangement})
        for i, k in enumerate(ks):
            cells = []
            for metric, _ in _METRICS:
                for s in strats:
                    row = by_key.get((s, arrangement, k))
                    cells.append("–" if row is None else getattr(row, metric).percent())
            body.append([arrangement.upper() if i == 0 else "", str(k), *cells])
    text = (
        "Update (↑, Maj) / No Update (↓, Maj) / Upper Bound (↑), % — mean (std over runs); N/A = 100 − Update − "
        "No Update is left out, as in the paper.\n\n" + markdown_table(header, body, left=1)
    )
    baseline = [r for r in rows if r.strategy == BASELINE]
    if baseline:
        b = baseline[0]
        cells = [b.update.percent(), b.no_update.percent(), b.na.percent(), str(b.n_units), str(b.n_runs)]
        text += "\nNo update phase (baseline, KEIC §4.4: story replaced directly, no correction turn):\n\n"
        text += markdown_table(("Update (↑)", "No Update (↓)", "N/A", "units", "runs"), [cells], left=0)
    tops = [(s, a) for a in arrs for s in strats if any(key[:2] == (s, a) for key in by_key)]
    if tops:
        ranked = []
        for s, a in tops:
            k_max = max(k for (s2, a2, k) in by_key if (s2, a2) == (s, a))
            ranked.append([a.upper(), s, ", ".join(map(str, by_key[(s, a, k_max)].templates))])
        text += "\nTemplates ranked by update (best first):\n\n"
        text += markdown_table(("Setting", "Strategy", "Ranking"), ranked)
    return text


def table2_csv_columns(strategies: Sequence[str]) -> list[str]:
    """``setting, K``, then ``{metric}_{strategy}`` and ``{metric}_{strategy}_std`` for metric in update,
    no_update, upper_bound, na (Table 2's column groups, plus N/A), strategies in the given order."""
    columns = ["setting", "K"]
    for metric in ("update", "no_update", "upper_bound", "na"):
        for s in strategies:
            columns += [f"{metric}_{s}", f"{metric}_{s}_std"]
    return columns


def _pct(value: float | None) -> str:
    return "" if value is None else f"{100 * value:.2f}"


def write_table2_csv(
    rows: Sequence[Table2Row],
    path: str | Path,
    strategies: Sequence[str] | None = None,
    arrangements: Sequence[str] | None = None,
) -> None:
    """Write Table 2 as CSV (:func:`table2_csv_columns`), one line per (setting, K), values in percent with two
    decimals; empty for a missing cell or std. The baseline is not included (:func:`write_baseline_csv`)."""
    strats, arrs, by_key = _grid(rows, strategies, arrangements)
    columns = table2_csv_columns(strats)
    with Path(path).open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        for arrangement in arrs:
            for k in sorted({k for (_, a, k) in by_key if a == arrangement}):
                line: dict[str, str] = {"setting": arrangement.upper(), "K": str(k)}
                for metric in ("update", "no_update", "upper_bound", "na"):
                    for s in strats:
                        row = by_key.get((s, arrangement, k))
                        stat = None if row is None else getattr(row, metric)
                        line[f"{metric}_{s}"] = "" if stat is None else _pct(stat.mean)
                        line[f"{metric}_{s}_std"] = "" if stat is None else _pct(stat.std)
                writer.writerow(line)


def write_baseline_csv(rows: Sequence[Table2Row], path: str | Path) -> bool:
    """Write the no-update-phase baseline (``update, update_std, no_update, ..., n_units, n_runs``, percent);
    returns False (and writes nothing) when ``rows`` has no baseline."""
    baseline = [r for r in rows if r.strategy == BASELINE]
    if not baseline:
        return False
    b = baseline[0]
    columns = ["update", "update_std", "no_update", "no_update_std", "na", "na_std", "n_units", "n_runs"]
    with Path(path).open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        writer.writerow(
            [_pct(b.update.mean), _pct(b.update.std), _pct(b.no_update.mean), _pct(b.no_update.std),
             _pct(b.na.mean), _pct(b.na.std), b.n_units, b.n_runs]
        )  # fmt: skip
    return True
