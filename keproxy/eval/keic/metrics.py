"""KEIC metrics: the context-update rate (CUR) of the forwarded history and the update / no update / N/A
outcome of the answer.

* CUR: the share of dialogues whose forwarded history no longer carries the old fact. A dialogue counts as
  updated (:func:`context_updated`) when ``support_old`` occurs in no forwarded message except the correction
  turn itself, and the story turn holds ``support_new``: the history now reads like the oracle story of
  KEIC §4.5 (string replacement).
* Answer: first-token exact match against Yes/No (KEIC §4.3). "update" = the new answer, "no update" = the old
  (false) one, "na" = the reply does not start with Yes/No (Table 2 caption, "N/A").
* Cost (KEIC Table 1): input tokens of one request = the final upstream call's ``prompt_tokens`` plus those of
  every editor call (:func:`input_tokens`); upstream calls = 1 + the editor calls (:func:`upstream_calls`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from keproxy.eval.keic.data import ANSWERS, Dialogue, KEICInstance
from keproxy.messages import message_text

__all__ = [
    "Outcome",
    "ReplayResult",
    "RunResult",
    "context_updated",
    "cur_by_template",
    "cur_rate",
    "extract_answer",
    "input_tokens",
    "outcome_rates",
    "score_answer",
    "summarize",
    "upstream_calls",
]

Outcome = Literal["update", "no_update", "na"]

# Leading characters skipped before the first token: whitespace, quotes and markdown emphasis/heading/list/quote
# marks, plus other punctuation ("(Yes)", "- No").
_LEADING = re.compile(r"^[\W_]+")
_FIRST_WORD = re.compile(r"[A-Za-z]+")


def _mentions(text: str, old: str, new: str) -> bool:
    """True if ``old`` occurs in ``text`` outside occurrences of ``new`` (when ``new`` contains ``old``)."""
    if old in new:
        text = text.replace(new, "\x00")
    return old in text


def context_updated(forwarded_messages: Sequence[Mapping[str, Any]], dialogue: Dialogue) -> bool:
    """The CUR criterion for one forwarded history.

    True iff ``dialogue.support_old`` occurs in no forwarded message except the correction turn (a user message
    whose text equals ``dialogue.correction``), and ``dialogue.support_new`` occurs in the story turn (the first
    user message). Messages may have string or content-part content.
    """
    old, new = dialogue.support_old, dialogue.support_new
    correction = dialogue.correction.strip()
    story_seen = False
    for message in forwarded_messages:
        text = message_text(message)
        role = message.get("role")
        if role == "user" and not story_seen:
            story_seen = True
            if new not in text:
                return False
        if role == "user" and text.strip() == correction:
            continue
        if _mentions(text, old, new):
            return False
    return story_seen


def extract_answer(text: str | None) -> str | None:
    """The Yes/No answer of a reply by first-token exact match (KEIC §4.3): "Yes", "No" or None.

    Leading whitespace, quotes, markdown marks and punctuation are skipped; the first word, lowercased, must
    be "yes" or "no" and end there ("Yesterday" -> None, "**Yes**" -> "Yes", " no," -> "No").
    """
    if not text:
        return None
    rest = _LEADING.sub("", text)
    match = _FIRST_WORD.match(rest)
    if match is None:
        return None
    end = match.end()
    if end < len(rest) and rest[end].isalnum():
        return None  # "No2", "Yes3": not a word on its own
    word = match.group().lower()
    if word == "yes":
        return "Yes"
    if word == "no":
        return "No"
    return None


def score_answer(answer: str | None, instance: KEICInstance) -> Outcome:
    """The outcome of ``answer``: "update" (the new answer), "no_update" (the old one) or "na".

    ``answer`` is an extracted "Yes"/"No"/None; any other string is run through :func:`extract_answer` first.
    """
    value = answer if answer in ANSWERS else extract_answer(answer)
    if value is None:
        return "na"
    if value == instance.new_answer:
        return "update"
    if value == instance.old_answer:
        return "no_update"
    return "na"


def _prompt_tokens(usage: Any) -> int | None:
    value = usage.get("prompt_tokens") if isinstance(usage, Mapping) else None
    return value if isinstance(value, int) else None


def input_tokens(transcript: Mapping[str, Any]) -> int | None:
    """Input tokens of one proxied request (KEIC Table 1, "# Input Tokens"): the final call's
    ``usage.prompt_tokens`` plus ``usage.prompt_tokens`` of each ``editor_calls`` entry.

    None when the final call reports no prompt tokens; editor calls without usage count 0.
    """
    final = _prompt_tokens(transcript.get("usage"))
    if final is None:
        return None
    calls = transcript.get("editor_calls") or []
    return final + sum(_prompt_tokens(call.get("usage")) or 0 for call in calls if isinstance(call, Mapping))


def upstream_calls(transcript: Mapping[str, Any]) -> int:
    """Upstream calls of one proxied request (KEIC Table 1, "# APIs"): 1 + ``len(editor_calls)``."""
    return 1 + len(transcript.get("editor_calls") or [])


@dataclass(frozen=True)
class ReplayResult:
    """One replayed dialogue: a row of ``dialogues.csv``.

    cur: the forwarded history passed :func:`context_updated`. answer: extracted Yes/No or None.
    prompt_tokens: upstream prompt tokens (None when not reported). latency_ms: the proxy's total, in ms.
    """

    instance_id: str
    variant: int
    template: int
    strategy: str
    arrangement: str
    cur: bool
    answer: str | None
    outcome: Outcome
    n_edits: int
    n_corrections: int
    request_id: str
    prompt_tokens: int | None
    latency_ms: float | None
    response: str = ""


@dataclass(frozen=True)
class RunResult:
    """One dialogue x strategy x run of the KEIC harness (:mod:`keproxy.eval.keic.harness`): a row of ``runs.csv``.

    template: 1-15, or 0 for the no-update-phase baseline (strategy "baseline", arrangement "none").
    run: 0-based run index. answer: extracted "Yes"/"No" or None; outcome: :func:`score_answer`.
    cur: :func:`context_updated` of the forwarded history. cur_ext: the extended CUR of
    :mod:`keproxy.eval.keic.cur` (None until judged). stale_turns: forwarded Q/A turns still stating the old fact
    (None until judged). input_tokens / upstream_calls: :func:`input_tokens` / :func:`upstream_calls`.
    latency_ms: the proxy's total, in ms. cached: the answer came from the harness cache, not a request.
    """

    instance_id: str
    variant: int
    template: int
    strategy: str
    arrangement: str
    run: int
    answer: str | None
    outcome: Outcome
    cur: bool
    cur_ext: bool | None
    stale_turns: int | None
    input_tokens: int | None
    upstream_calls: int
    n_edits: int
    n_corrections: int
    history_mentions_old: bool
    propagation: bool
    request_id: str
    latency_ms: float | None
    cached: bool = False
    response: str = ""


def cur_rate(results: Iterable[ReplayResult]) -> float:
    """Share of results with ``cur`` true, in [0, 1]; 0.0 when there are none."""
    rows = list(results)
    return sum(r.cur for r in rows) / len(rows) if rows else 0.0


def cur_by_template(results: Iterable[ReplayResult]) -> dict[str, float]:
    """CUR per template number, keys "1".."15" (only the templates present), in numeric order."""
    groups: dict[int, list[ReplayResult]] = defaultdict(list)
    for r in results:
        groups[r.template].append(r)
    return {str(t): cur_rate(groups[t]) for t in sorted(groups)}


def outcome_rates(results: Iterable[ReplayResult]) -> dict[str, float]:
    """{"update", "no_update", "na"} -> share of results, each in [0, 1] (all 0.0 when there are none)."""
    rows = list(results)
    n = len(rows)
    return {k: (sum(r.outcome == k for r in rows) / n if n else 0.0) for k in ("update", "no_update", "na")}


def summarize(results: Iterable[ReplayResult]) -> dict[str, dict[str, Any]]:
    """The ``summary.json`` body: per strategy (in first-seen order)
    ``{"cur", "cur_by_template": {"1": .., ...}, "update", "no_update", "na", "n"}``, rates in [0, 1]."""
    by_strategy: dict[str, list[ReplayResult]] = {}
    for r in results:
        by_strategy.setdefault(r.strategy, []).append(r)
    summary: dict[str, dict[str, Any]] = {}
    for strategy, rows in by_strategy.items():
        rates = outcome_rates(rows)
        summary[strategy] = {
            "cur": cur_rate(rows),
            "cur_by_template": cur_by_template(rows),
            "update": rates["update"],
            "no_update": rates["no_update"],
            "na": rates["na"],
            "n": len(rows),
        }
    return summary
