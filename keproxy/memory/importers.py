"""Edits from benchmark files: CounterFact, zsRE, and keproxy's own JSON lines.

- ``counterfact``: a JSON list (or JSON lines) of CounterFact records, in either layout:
  ROME's ``{case_id, requested_rewrite: {prompt: "The mother tongue of {} is", subject, target_new: {str},
  target_true: {str}}, ...}`` or EasyEdit's flat ``{case_id, prompt: "The mother tongue of Danielle Darrieux
  is", subject, target_new, ground_truth, rephrase_prompt, ...}`` (``shared/data/counterfact/``);
- ``zsre``: a JSON list of zsRE MEND-eval records ``{subject, src (question), alt (new answer),
  answers[] (true answers), pred, rephrase, loc, ...}`` (``shared/data/zsre/``);
- ``jsonl``: one :class:`Edit` JSON object per line (fields of the Edit model; unknown fields are errors).

Benchmark records become ``triple`` edits with source ``import``: ``text`` is the filled prompt followed by
the new target ("The mother tongue of Danielle Darrieux is English."; for zsRE, the question followed by the
new answer: "When was the inception of IAAF Combined Events Challenge? 2006."), ``relation`` the prompt with
``{}`` for the subject, and the benchmark's id in ``metadata`` (``case_id`` / ``record``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from keproxy.errors import InvalidRequestError
from keproxy.memory.edits import Edit, EditScopeKind

__all__ = ["IMPORT_FORMATS", "ImportFormat", "import_edits"]

ImportFormat = Literal["counterfact", "zsre", "jsonl"]
IMPORT_FORMATS: tuple[str, ...] = ("counterfact", "zsre", "jsonl")


def _records(path: Path) -> Iterator[Any]:
    """The records of a JSON list, or of a JSON-lines file."""
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):
        yield from json.loads(text)
        return
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidRequestError(f"{path}:{number}: not JSON: {exc}") from None


def _sentence(prompt: str, target: str) -> str:
    """``prompt`` followed by ``target``, ending with a full stop ("The capital of X is" + "Paris")."""
    text = f"{prompt.rstrip()} {target.strip()}"
    return text if text.endswith((".", "!", "?")) else text + "."


def counterfact_edit(record: dict[str, Any], **common: Any) -> Edit:
    """The edit of one CounterFact record (ROME or EasyEdit layout; see the module docstring)."""
    if "requested_rewrite" in record:
        rewrite = record["requested_rewrite"]
        subject = rewrite["subject"]
        relation = rewrite["prompt"]
        target_new = rewrite["target_new"]["str"]
        target_true = (rewrite.get("target_true") or {}).get("str")
    else:
        subject = record["subject"]
        prompt = record["prompt"]
        relation = prompt.replace(subject, "{}", 1) if subject in prompt else prompt
        target_new = record["target_new"]
        target_true = record.get("ground_truth")
    filled = relation.replace("{}", subject, 1) if "{}" in relation else relation
    return Edit(
        kind="triple", text=_sentence(filled, target_new), subject=subject, relation=relation,
        target_true=target_true, target_new=target_new, source="import",
        metadata={"dataset": "counterfact", "case_id": record.get("case_id")}, **common,
    )  # fmt: skip


def zsre_edit(record: dict[str, Any], number: int, **common: Any) -> Edit:
    """The edit of one zsRE record: question ``src`` + new answer ``alt``; ``answers[0]`` is the old one."""
    question = record["src"]
    subject = record["subject"]
    answers = record.get("answers") or []
    return Edit(
        kind="triple", text=_sentence(question, record["alt"]), subject=subject,
        relation=question.replace(subject, "{}", 1) if subject in question else question,
        target_true=answers[0] if answers else None, target_new=record["alt"], source="import",
        metadata={"dataset": "zsre", "record": number}, **common,
    )  # fmt: skip


def import_edits(
    path: Path | str,
    format: ImportFormat,
    *,
    tenant: str = "default",
    scope: EditScopeKind = "global",
    scope_id: str | None = None,
    limit: int | None = None,
) -> list[Edit]:
    """The edits in the file ``path`` of ``format`` ("counterfact", "zsre" or "jsonl"), at most ``limit``.

    Benchmark records get ``tenant``, ``scope`` and ``scope_id``; jsonl edits keep their own values when they
    have them. Raises InvalidRequestError naming the file and record on a bad format or a bad record,
    FileNotFoundError when the file is missing.
    """
    source = Path(path)
    if format not in IMPORT_FORMATS:
        raise InvalidRequestError(f"unknown format {format!r}; available: {', '.join(IMPORT_FORMATS)}")
    common: dict[str, Any] = {"tenant": tenant, "scope": scope, "scope_id": scope_id}
    edits: list[Edit] = []
    for number, record in enumerate(_records(source)):
        if limit is not None and len(edits) >= limit:
            break
        try:
            if format == "counterfact":
                edits.append(counterfact_edit(record, **common))
            elif format == "zsre":
                edits.append(zsre_edit(record, number, **common))
            else:
                edits.append(Edit.model_validate({**common, **record}))
        except (KeyError, TypeError, AttributeError, ValidationError) as exc:
            detail = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else f"missing or bad {exc}"
            raise InvalidRequestError(f"{source}: record {number}: {detail}") from None
    return edits
