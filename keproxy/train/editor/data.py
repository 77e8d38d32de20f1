"""Training data of the post-editor: postEdit Algorithm 2, "Original Response Augment" and "Edited Response
Augment" with its TE / SE filter.

For each training case (:func:`keproxy.eval.postedit.data.load_cases`, split "train": CounterFact's val file,
zsRE records 500+; never the evaluation split) and each of its queries x (Simple, Rephrase, OOS):

1. y_o = f_base(x): the configured base model's answer, asked through a keproxy proxy with ``edit_mode:
   "off"`` (default: the embedded SmolLM2 via ``serve_proxy``) and cached by request hash;
2. in scope (Simple, Rephrase): y_e = the augmenter's edit of y_o: ``span`` (keproxy's rule-based
   post-editor) or ``litellm:<model>`` (a chat model given T^aug, App. B.2, temperature 0.1 as in App. C.3;
   cached); the example is kept only when TE(y_e) = 1 and SE(y_e) = 1 (postEdit Algorithm 1 on [x, y_e]);
3. out of scope: y_e = ``<Retain>``.

With ``stated`` (the default build), every query also gets a second original response, the one a base model that
knows the fact gives: the query completed with the old object, ``f"{x} {o}."`` ("The mother tongue of Danielle
Darrieux is French."). postEdit augments original responses with ChatGPT, which states such facts; SmolLM2 mostly
rambles past them (215 of its 1,000 in-scope training answers name the old object, 90 of its 500 out-of-scope
ones), so the substitution that postEdit's test subset asks for (every in-scope test answer names the old object)
is rare in its drafts. The stated drafts go through the same augmenter and TE / SE filter; out-of-scope ones
(CounterFact's neighbourhood prompts share the old object) keep ``<Retain>``. Queries that are questions (ending in
"?") get none. ``stated_new`` (off by default, not yet built and measured) adds the in-scope queries completed with
the new object, with target ``<Retain>``: a triple text that already agrees with the edit is left alone.

Each example is the post-editor's input T^edit(e, x, y_o) (what :class:`keproxy.editors.postedit.LocalPostEditor`
feeds the model) and its target y_e.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from keproxy.editors.postedit import RETAIN_TOKEN, SpanPostEditor, fill_t_aug, fill_t_edit
from keproxy.eval.core.answers import PromptRequest, fetch_answers
from keproxy.eval.core.cache import AnswerCache, request_key
from keproxy.eval.postedit.data import EditCase, load_cases
from keproxy.eval.postedit.metrics import QUERY_TYPES, QueryType, entailed, se_score, te_score
from keproxy.memory.edits import Edit
from keproxy.nli.base import NLIBackend

__all__ = [
    "EditorExample",
    "UpstreamSpec",
    "augment_span",
    "build_editor_data",
    "case_texts",
    "examples_digest",
    "stated_response",
    "training_cases",
]


@dataclass(frozen=True)
class EditorExample:
    """One SFT example: ``prompt`` = T^edit(e, x, y_o), ``target`` = y_e or ``<Retain>``."""

    case_id: str
    query_type: QueryType
    x: str
    y_o: str
    prompt: str
    target: str
    source: str = "base"
    """Where y_o comes from: "base" (the base model's answer), "stated" / "stated-new" (the query completed with
    the old / new object) or "hand" (written by hand)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class UpstreamSpec:
    """Where y_o comes from: a keproxy proxy at ``base_url`` (None: start ``keproxy serve`` on the embedded
    model, or on litellm's ``mock_response``), model alias ``model`` (None: the local alias, or "demo" with
    a mock), ``max_tokens`` per answer, temperature 0."""

    base_url: str | None = None
    model: str | None = None
    mock_response: str | None = None
    max_tokens: int = 64
    api_key: str = "keproxy"


def stated_response(x: str, o_old: str) -> str | None:
    """The original response of a base model that knows the fact: ``x`` completed with the old object and a full
    stop; None for a question or a case with no old object."""
    x = x.rstrip()
    if not o_old or x.endswith("?"):
        return None
    return f"{x} {o_old}."


def _retains(query_type: str, source: str) -> bool:
    """Whether a draft's target is ``<Retain>``: out-of-scope queries, and answers that already state the new
    object."""
    return query_type == "oos" or source == "stated-new"


def augment_span(edit: Edit, x: str, y_o: str) -> str:
    """The ``span`` augmenter: keproxy's rule-based post-editor applied to y_o (its Retain keeps y_o)."""
    return SpanPostEditor().apply(x, y_o, edit).apply(y_o)


def _litellm_augmenter(
    model: str, cache: AnswerCache, mock_response: str | None = None
) -> Callable[[Edit, str, str], str]:
    """A chat model given T^aug (postEdit App. B.2) at temperature 0.1, answers cached by request hash."""

    def augment(edit: Edit, x: str, y_o: str) -> str:
        messages = [{"role": "user", "content": fill_t_aug(edit, x, y_o)}]
        key = request_key(model, messages, "t_aug", {"temperature": 0.1}, 0)
        entry = cache.get(key)
        if entry is None:
            import litellm

            kwargs = {"mock_response": mock_response} if mock_response is not None else {}
            result = litellm.completion(model=model, messages=messages, temperature=0.1, **kwargs)
            entry = {"text": result.choices[0].message.content or ""}
            cache.put(key, entry)
        return str(entry["text"]).strip()

    return augment


def examples_digest(examples: Sequence[EditorExample]) -> str:
    """sha256 (hex) of the examples' canonical JSON: part of the adapter's config hash."""
    blob = json.dumps([e.to_dict() for e in examples], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def case_texts(case: EditCase) -> tuple[str, ...]:
    """The texts a training case puts into the editor's data: its three queries and both statements."""
    return (*case.queries.values(), case.k_new, case.k_old)


def training_cases(
    datasets: Sequence[str], per: int | None, *, data_dir: Path | None = None
) -> list[EditCase]:
    """The first ``per`` usable training cases of each dataset (all when None), leaving out every case with a
    text that leaks an evaluation set (:class:`keproxy.train.hygiene.LeakIndex`: CounterFact's val and edit
    files share prompts, and LEME and MQuAKE quote CounterFact records)."""
    from keproxy.train.hygiene import LeakIndex, evaluation_sets

    index = LeakIndex(text for texts in evaluation_sets(data_dir).values() for text in texts)
    cases: list[EditCase] = []
    for name in datasets:
        kept = [
            c
            for c in load_cases(name, split="train", data_dir=data_dir)
            if not any(index.find(t) for t in case_texts(c))
        ]
        cases += kept if per is None else kept[:per]
    return cases


def build_editor_data(
    *,
    datasets: Sequence[str],
    n_cases: int,
    cache_dir: Path,
    nli: NLIBackend,
    upstream: UpstreamSpec,
    augmenter: str = "span",
    augmenter_mock_response: str | None = None,
    stated: bool = False,
    stated_new: bool = False,
    progress: bool = True,
) -> tuple[list[EditorExample], dict[str, Any]]:
    """Algorithm 2's augmented training set: (examples, counts): the base model's in case order, then (``stated``)
    the stated responses' in case order, then (``stated_new``) the in-scope queries completed with the *new*
    object, whose target is ``<Retain>`` (an answer that already agrees). ``n_cases`` cases per dataset, split
    evenly. Counts: ``cases``,
    ``queries``, ``kept`` / ``dropped`` per query type (``simple+stated`` ... for the stated drafts), ``asked`` /
    ``cached`` upstream answers. Raises ValueError on an unknown augmenter, HarnessError when the proxy fails."""
    if augmenter != "span" and not augmenter.startswith("litellm:"):
        raise ValueError(f"unknown augmenter {augmenter!r}; use 'span' or 'litellm:<model>'")
    cache = AnswerCache(cache_dir)
    per = max(1, -(-n_cases // max(len(datasets), 1)))
    cases = training_cases(datasets, per)
    model = upstream.model
    if model is None:
        from keproxy.settings import load_settings

        model = "demo" if upstream.mock_response is not None else load_settings().local_model.alias
    params = {"temperature": 0.0, "max_tokens": upstream.max_tokens}
    queries = [(c, t, c.queries[t]) for c in cases for t in QUERY_TYPES]
    requests = [PromptRequest.of(model, [{"role": "user", "content": x}], params) for _, _, x in queries]
    asked, cached = fetch_answers(
        requests, cache, model=model, params=params, state_dir=cache_dir / "_proxy",
        base_url=upstream.base_url, mock_response=upstream.mock_response, api_key=upstream.api_key,
        progress=progress, description="original responses (y_o)",
    )  # fmt: skip
    augment = (
        augment_span
        if augmenter == "span"
        else _litellm_augmenter(augmenter.split(":", 1)[1], cache, augmenter_mock_response)
    )
    originals = [(case, qtype, x, str((cache.get(req.key) or {}).get("text", "")), "base")
                 for (case, qtype, x), req in zip(queries, requests, strict=True)]  # fmt: skip
    if stated:
        originals += [(case, qtype, x, y_o, "stated") for case, qtype, x in queries
                      if (y_o := stated_response(x, case.o_old)) is not None]  # fmt: skip
    if stated_new:
        originals += [(case, qtype, x, y_o, "stated-new") for case, qtype, x in queries
                      if qtype != "oos" and (y_o := stated_response(x, case.o_new)) is not None]  # fmt: skip
    drafts = [
        (case, qtype, x, y_o, RETAIN_TOKEN if _retains(qtype, source) else augment(case.edit, x, y_o), source)
        for case, qtype, x, y_o, source in originals
    ]
    # The TE = 1 and SE = 1 filter of Algorithm 2, on the edited drafts (one NLI batch).
    ins = [d for d in drafts if not _retains(d[1], d[5])]
    pairs = [p for c, _, x, _, y_e, _ in ins for p in ((f"{x} {y_e}".lower(), c.k_new.lower()),
                                                      (f"{x} {y_e}".lower(), c.k_old.lower()))]  # fmt: skip
    decisions = iter(entailed(nli, pairs))
    keep: dict[int, bool] = {}
    for draft in ins:
        case, y_e = draft[0], draft[4]
        ent_new, ent_old = next(decisions), next(decisions)
        te = te_score(y_e, "INS", case.o_old, case.o_new)
        keep[id(draft)] = te == 1.0 and se_score("INS", ent_new, ent_old) == 1.0
    examples: list[EditorExample] = []
    kept: Counter[str] = Counter()
    dropped: Counter[str] = Counter()
    for draft in drafts:
        case, qtype, x, y_o, y_e, source = draft
        key = qtype if source == "base" else f"{qtype}+{source}"
        if not _retains(qtype, source) and not keep[id(draft)]:
            dropped[key] += 1
            continue
        kept[key] += 1
        prompt = fill_t_edit(case.edit, x, y_o)
        examples.append(EditorExample(case.case_id, qtype, x, y_o, prompt, y_e, source))
    counts = {
        "cases": len(cases),
        "queries": len(queries),
        "kept": dict(kept),
        "dropped": dict(dropped),
        "asked": asked,
        "cached": cached,
    }
    return examples, counts
