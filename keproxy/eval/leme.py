"""``keproxy eval leme``: long-form evaluation of knowledge edits (LEME, Rosati et al., 2024) through the proxy.

Each case is a CounterFact edit ``s, r, o -> o*`` with LEME's coupled-entity prompts (§3.1): the *main* prompt
("Write an essay about <subject>. Include the following information: ...") and the *related* prompt about an
entity highly coupled with the subject. The edits are stored in keproxy's edit memory through ``POST
/v1/edits`` (global scope, so retrieval competes with every other case's edit), and both passages are
generated through the proxy under each method's ``edit_mode``:

- ``none`` — ``off``: the upstream alone (LEME's "no edit" control);
- ``prompt`` / ``ike`` — keproxy's pre-processing baselines (the retrieved edit in the forwarded request);
- ``postedit`` — keproxy's postEdit mode with the server's post-editor (``post_editor``, default ``span``).

Measures (LEME §3.2–3.3, App. I, with keproxy's NLI backend instead of DeBERTaV3):

- **claim classification** (§3.3): every passage against three kinds of claim — the new fact ("<s> r o*"),
  the old fact ("<s> r o") and ground-truth statements of the entity ("The <property> of <entity> is <value>",
  values equal to o left out) — as *supports* / *neutral* / *contradicts*: supports when the NLI model's top
  label is entailment for the passage or one of its sentences sharing a content word with the claim
  (:func:`keproxy.eval.postedit.metrics.premise_windows`), contradicts when it is contradiction for one of
  them and none entails, neutral otherwise. The distribution per method, claim kind and passage is the main
  table (Fig. 4's layout);
- **edit consistency** = main passages supporting the new fact, and related passages not contradicting it;
  **factual consistency** = ground-truth claims not contradicted; **internal consistency** = sentence pairs of
  one passage that do not contradict each other (pairs sharing a content word); **cross-passage consistency**
  = the same between a main and its related passage;
- **topicality** = passages naming their entity, and the cosine (all-MiniLM-L6-v2) between passage and entity;
- **naturalness** = perplexity of the passage under a local causal LM (SmolLM2-135M in transformers format,
  ``keproxy train editor`` converts it; App. I used GPT2-XL); skipped when it is missing;
- **survey** (``survey_model``, optional): an LLM rates the 9 statements of LEME's survey (App. D, Table 7) on
  the 7-point scale; answers are parsed and validated (nine integers 1–7), unparseable ones are counted.

Outputs in ``out``: ``claims.md`` / ``claims.csv`` (the classification distribution), ``table.md`` /
``table.csv`` (the measures per method), ``passages.csv``, ``summary.json``, ``leme.png``; passages and
judgements are cached in ``out/cache``.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from keproxy.datasets import shared_data_dir
from keproxy.eval.core.answers import PromptRequest, fetch_answers
from keproxy.eval.core.cache import AnswerCache
from keproxy.eval.core.proxy import HarnessError, default_model, serve_proxy
from keproxy.eval.core.urls import ProxyRoot
from keproxy.memory.edits import Edit

__all__ = [
    "CLAIM_LABELS",
    "LEME_METHODS",
    "SURVEY_QUESTIONS",
    "LemeCase",
    "LemeEvalConfig",
    "LemeEvalReport",
    "classify_claims",
    "load_leme",
    "parse_survey",
    "run_leme_eval",
]

LemeMethod = Literal["none", "prompt", "ike", "postedit"]
LEME_METHODS: dict[str, tuple[str, str]] = {  # key -> (table label, keproxy edit_mode)
    "none": ("no edit", "off"),
    "prompt": ("PROMPT", "prompt"),
    "ike": ("IKE", "ike"),
    "postedit": ("postEdit (server's post-editor)", "postedit"),
}
_ORDER: tuple[LemeMethod, ...] = ("none", "prompt", "ike", "postedit")
CLAIM_LABELS = ("supports", "neutral", "contradicts")
_FILE = "leme/counterfact_with_dependancies_sample.json"
_ENTAILMENT, _NEUTRAL, _CONTRADICTION = 0, 1, 2  # keproxy.nli.base.LABELS order

#: LEME App. D, Table 7: the survey statements, rated on a 7-point scale (1 strongly disagree .. 7 strongly agree).
SURVEY_QUESTIONS = (
    "The main passage is written as if the new fact is true.",
    "The related passage does not contradict the new fact.",
    "Ignoring the new fact, most of the old facts are still true in the main passage.",
    "Ignoring the new fact, most of the old facts are still true in the related passage.",
    "Ignoring the old and new facts, the main passage does not contradict itself.",
    "Ignoring the old and new facts, the related passage does not contradict itself.",
    "Ignoring the old and new facts, the main passage and the related passage do not contradict each other.",
    "The main passage is focused on the subject and the related passage is focused on the related entity.",
    "Both passages are natural sounding text close to what a human would write.",
)
SURVEY_DIMENSIONS = (
    "edit",
    "edit",
    "factual",
    "factual",
    "internal",
    "internal",
    "cross",
    "topical",
    "fluency",
)
_SURVEY_PROMPT = """You rate two passages written by a language model after one of its facts was edited.
New fact: {new}
Old fact: {old}

Main passage (about {subject}):
{main}

Related passage (about {related}):
{related_passage}

Rate each statement on a 7-point scale: 1 strongly disagree, 2 disagree, 3 somewhat disagree, 4 neutral,
5 somewhat agree, 6 agree, 7 strongly agree. Answer with exactly nine lines "<number>: <rating>" and nothing
else.
{questions}"""
_SURVEY_LINE = re.compile(r"^\s*(\d)\s*[:.)-]\s*([1-7])\b", re.M)


@dataclass(frozen=True)
class LemeCase:
    """One LEME case: the edit, its new / old fact statements, and the two prompts with their entities and
    ground-truth claims (``main_truths`` / ``related_truths``: "The <property> of <entity> is <value>.")."""

    case_id: str
    edit: Edit
    new_fact: str
    old_fact: str
    subject: str
    main_prompt: str
    related: str
    related_prompt: str
    main_truths: tuple[str, ...]
    related_truths: tuple[str, ...]


def _truths(entity: str, ground_truth: Mapping[str, Sequence[str]], drop: str, limit: int) -> tuple[str, ...]:
    claims = []
    for prop, values in ground_truth.items():
        value = next((v for v in values if v and v.strip().lower() != drop.lower()), None)
        if value and prop not in ("sex or gender", "given name", "family name"):
            claims.append(f"The {prop} of {entity} is {value}.")
    return tuple(claims[:limit])


def load_leme(n: int | None = None, data_dir: Path | None = None, *, truths: int = 6) -> list[LemeCase]:
    """The first ``n`` cases of ``leme/counterfact_with_dependancies_sample.json`` (100 CounterFact records with
    one coupled entity each) under ``data_dir`` (default: the shared data folder), with at most ``truths``
    ground-truth claims per entity. Raises FileNotFoundError when the file is missing."""
    root = data_dir or shared_data_dir()
    path = None if root is None else root / _FILE
    if path is None or not path.is_file():
        raise FileNotFoundError(
            f"{_FILE} is missing from the shared data folder (see shared/data/leme/SOURCE.md)"
        )
    cases = []
    for record in json.loads(path.read_text(encoding="utf-8"))[:n]:
        rw = record["requested_rewrite"]
        subject, new, old = rw["subject"], rw["target_new"]["str"], rw["target_true"]["str"]
        sentence = rw["prompt"].format(subject)
        coupled = record["coupled_prompts_and_properties"]
        main = coupled["subject_entity"]
        other = coupled["coupled_entities"][0]
        edit = Edit(
            kind="triple", text=f"{sentence} {new}.", subject=subject, relation=rw["prompt"], target_true=old,
            target_new=new, source="import",
            metadata={"dataset": "leme", "leme_case": record["case_id"], "relation_id": rw["relation_id"]},
        )  # fmt: skip
        cases.append(
            LemeCase(
                case_id=f"leme:{record['case_id']}",
                edit=edit,
                new_fact=f"{sentence} {new}.",
                old_fact=f"{sentence} {old}.",
                subject=subject,
                main_prompt=main.get("dependant_prompt") or main["coupled_prompt"],
                related=other["entity"],
                related_prompt=other.get("dependant_prompt") or other["coupled_prompt"],
                main_truths=_truths(subject, main.get("ground_truth", {}), old, truths),
                related_truths=_truths(other["entity"], other.get("ground_truth", {}), old, truths),
            )
        )
    return cases


def classify_claims(nli: Any, pairs: Sequence[tuple[str, str]]) -> list[str]:
    """LEME §3.3 labels for (passage, claim) pairs: "supports" when entailment is the top label for the passage
    or one of its claim-sharing sentences, else "contradicts" when contradiction is, else "neutral"; one NLI
    batch for all pairs."""
    from keproxy.eval.postedit.metrics import premise_windows

    flat: list[tuple[str, str]] = []
    owner: list[int] = []
    for i, (passage, claim) in enumerate(pairs):
        for window in premise_windows(passage, claim) if passage.strip() else []:
            flat.append((window, claim))
            owner.append(i)
    tops = np.asarray(nli.predict(flat)).argmax(axis=1) if flat else np.zeros(0, dtype=int)
    seen: list[set[int]] = [set() for _ in pairs]
    for i, top in zip(owner, tops.tolist(), strict=True):
        seen[i].add(int(top))
    return [
        "supports" if _ENTAILMENT in s else "contradicts" if _CONTRADICTION in s else "neutral" for s in seen
    ]


def parse_survey(text: str) -> list[int] | None:
    """The nine 1–7 ratings of a survey answer ("1: 6" per line, in order), or None unless all nine are there
    exactly once."""
    found: dict[int, int] = {}
    for number, rating in _SURVEY_LINE.findall(text):
        index = int(number)
        if index in found or not 1 <= index <= 9:
            return None
        found[index] = int(rating)
    if sorted(found) != list(range(1, 10)):
        return None
    return [found[i] for i in range(1, 10)]


class LemeEvalConfig(BaseModel):
    """What ``keproxy eval leme`` runs; each field has a command-line option."""

    model_config = ConfigDict(extra="forbid")

    data_dir: Path | None = Field(default=None, description="Folder holding leme/; None: shared data.")
    n: int | None = Field(default=20, ge=1, description="Cases (of 100).")
    methods: list[LemeMethod] = Field(default_factory=lambda: list(_ORDER), description="Methods.")
    out: Path = Field(default=Path("leme-eval"), description="Output folder.")
    base_url: ProxyRoot | None = Field(
        default=None, description="Proxy URL, root or /v1 form; None: start `keproxy serve`."
    )
    model: str | None = Field(default=None, description="Model alias; None: the embedded local model.")
    survey_model: str | None = Field(default=None, description="Alias of the survey judge; None: no survey.")
    mock_response: str | None = Field(default=None, description="Self-started proxy: answer with this.")
    api_key: str = Field(default="keproxy", description="Bearer key for the proxy.")
    max_tokens: int = Field(default=200, ge=1, description="max_tokens of each passage.")
    nli: str = Field(default="local", description="NLI backend spec (keproxy.nli.get_nli_backend).")
    perplexity_model: Path = Field(
        default=Path("artifacts/smollm2-hf"), description="Causal LM (transformers folder) for naturalness."
    )
    progress: bool = Field(default=True, description="Show progress bars.")
    plots: bool = Field(default=True, description="Write leme.png.")


@dataclass
class LemeEvalReport:
    claims: list[dict[str, Any]]
    rows: list[dict[str, Any]]
    requests: int = 0
    cached: int = 0
    edits_added: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)


@dataclass(frozen=True)
class _Gen:
    case: LemeCase
    method: str
    passage: str  # "main" or "related"
    request: PromptRequest


def _store_edits(url: str, api_key: str, cases: Sequence[LemeCase]) -> int:
    """POST every case's edit to the proxy's edit memory unless an active edit of the same LEME case is there;
    returns the number added. Raises HarnessError when the edits API refuses."""
    import httpx

    headers = {"authorization": f"Bearer {api_key}"}
    with httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=60) as client:
        present: set[object] = set()
        offset = 0
        while True:
            page = client.get("/v1/edits", params={"source": "import", "limit": 500, "offset": offset})
            if page.status_code != 200:
                raise HarnessError(f"GET /v1/edits: {page.status_code} {page.text[:200]}")
            data = page.json().get("data", [])
            present.update(e.get("metadata", {}).get("leme_case") for e in data if e.get("active", True))
            if len(data) < 500:
                break
            offset += 500
        added = 0
        for case in cases:
            if case.edit.metadata["leme_case"] in present:
                continue
            body = case.edit.model_dump(include={"kind", "text", "subject", "relation", "target_true", "target_new",
                                                 "source", "metadata"})  # fmt: skip
            response = client.post("/v1/edits", json=body)
            if response.status_code not in (200, 201):
                raise HarnessError(f"POST /v1/edits: {response.status_code} {response.text[:200]}")
            added += 1
    return added


def run_leme_eval(config: LemeEvalConfig, *, log: Callable[[str], None] = lambda _m: None) -> LemeEvalReport:
    """Run the evaluation of the module docstring and write its files. Raises FileNotFoundError (no shared
    data), HarnessError (proxy trouble, --base-url without a model) and ValueError (bad arguments)."""
    started = time.monotonic()
    model = default_model(config.model, config.base_url, config.mock_response)
    cases = load_leme(config.n, config.data_dir)
    methods = [m for m in _ORDER if m in config.methods]
    log(f"LEME: {len(cases)} cases, {len(methods)} methods, {2 * len(cases) * len(methods)} passages")
    config.out.mkdir(parents=True, exist_ok=True)
    cache = AnswerCache(config.out / "cache")
    params = {"temperature": 0.0, "max_tokens": config.max_tokens}
    gens = [
        _Gen(case, method, which, PromptRequest.of(model, [{"role": "user", "content": prompt}], params,
                                                   LEME_METHODS[method][1]))
        for method in methods for case in cases
        for which, prompt in (("main", case.main_prompt), ("related", case.related_prompt))
    ]  # fmt: skip
    report = LemeEvalReport(claims=[], rows=[])
    survey: dict[str, list[int] | None] = {}
    with ExitStack() as stack:
        url = config.base_url
        if url is None and (any(not cache.has(g.request.key) for g in gens) or config.survey_model):
            url = stack.enter_context(serve_proxy(config.out / "state", mock_response=config.mock_response))
        if url is not None and any(not cache.has(g.request.key) for g in gens):
            report.edits_added = _store_edits(url, config.api_key, cases)
        report.requests, report.cached = fetch_answers(
            [g.request for g in gens], cache, model=model, params=params, state_dir=config.out / "state",
            base_url=url, api_key=config.api_key, progress=config.progress, description="LEME passages",
        )  # fmt: skip
        passages = {(g.case.case_id, g.method, g.passage): str((cache.get(g.request.key) or {}).get("text", ""))
                    for g in gens}  # fmt: skip
        if config.survey_model:
            survey = _survey(config, cases, methods, passages, cache, url)
    log("scoring: NLI claims and consistency, topicality, perplexity")
    _score(config, report, cases, methods, passages, survey)
    report.seconds = time.monotonic() - started
    report.files = _write_outputs(config, report, gens, passages)
    return report


def _survey(
    config: LemeEvalConfig,
    cases: Sequence[LemeCase],
    methods: Sequence[str],
    passages: Mapping[tuple[str, str, str], str],
    cache: AnswerCache,
    url: str | None,
) -> dict[str, list[int] | None]:
    """Survey ratings per (case, method) key "case_id|method" from the survey judge through the proxy."""
    assert config.survey_model is not None
    params = {"temperature": 0.0, "max_tokens": 64}
    questions = "\n".join(f"{i}. {q}" for i, q in enumerate(SURVEY_QUESTIONS, 1))
    requests: dict[str, PromptRequest] = {}
    for method in methods:
        for case in cases:
            prompt = _SURVEY_PROMPT.format(
                new=case.new_fact, old=case.old_fact, subject=case.subject, related=case.related,
                main=passages[(case.case_id, method, "main")], questions=questions,
                related_passage=passages[(case.case_id, method, "related")],
            )  # fmt: skip
            messages = [{"role": "user", "content": prompt}]
            requests[f"{case.case_id}|{method}"] = PromptRequest.of(config.survey_model, messages, params)
    fetch_answers(
        list(requests.values()), cache, model=config.survey_model, params=params, state_dir=config.out / "state",
        base_url=url, api_key=config.api_key, progress=config.progress, description="LEME survey",
    )  # fmt: skip
    return {key: parse_survey(str((cache.get(r.key) or {}).get("text", ""))) for key, r in requests.items()}


def _sentence_pairs(a: str, b: str | None = None) -> list[tuple[str, str]]:
    """Sentence pairs of one passage (``b`` None) or across two that share a content word (the topic gate of
    keproxy's Deletion editor): only those can contradict each other."""
    from keproxy.editors.deletion_backends import content_words
    from keproxy.editors.sentences import split_sentences

    first = [a[s:e] for s, e in split_sentences(a)]
    pairs = (
        itertools.combinations(first, 2)
        if b is None
        else itertools.product(first, [b[s:e] for s, e in split_sentences(b)])
    )
    return [(x, y) for x, y in pairs if content_words(x) & content_words(y)]


def _perplexities(path: Path, texts: Sequence[str]) -> list[float | None]:
    """Perplexity (exp of the mean token NLL) of each text under the causal LM at ``path``; None for texts of
    fewer than 2 tokens."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    lm = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32).eval()
    out: list[float | None] = []
    with torch.no_grad():
        for text in texts:
            ids = tokenizer(text, return_tensors="pt", truncation=True, max_length=512).input_ids
            if ids.shape[1] < 2:
                out.append(None)
                continue
            out.append(float(math.exp(lm(ids, labels=ids).loss.item())))
    return out


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None and not math.isnan(v)]
    return sum(kept) / len(kept) if kept else None


def _score(
    config: LemeEvalConfig,
    report: LemeEvalReport,
    cases: Sequence[LemeCase],
    methods: Sequence[str],
    passages: Mapping[tuple[str, str, str], str],
    survey: Mapping[str, list[int] | None],
) -> None:
    from keproxy.memory import Embedder
    from keproxy.nli import get_nli_backend

    nli = get_nli_backend(config.nli)
    embedder = Embedder.from_name_or_path(None)
    claim_pairs: list[
        tuple[str, str, str, str, str]
    ] = []  # (case id, method, passage kind, claim kind, claim)
    for method in methods:
        for case in cases:
            for which, truths in (("main", case.main_truths), ("related", case.related_truths)):
                claim_pairs.append((case.case_id, method, which, "new fact", case.new_fact))
                claim_pairs.append((case.case_id, method, which, "old fact", case.old_fact))
                claim_pairs.extend((case.case_id, method, which, "ground truth", t) for t in truths)
    labels = classify_claims(nli, [(passages[(c, m, w)], claim) for c, m, w, _, claim in claim_pairs])
    for method in methods:
        for which in ("main", "related"):
            for kind in ("new fact", "old fact", "ground truth"):
                mine = [lab for (_, m, w, k, _), lab in zip(claim_pairs, labels, strict=True)
                        if m == method and w == which and k == kind]  # fmt: skip
                dist: dict[str, Any] = {
                    "method": LEME_METHODS[method][0],
                    "passage": which,
                    "claim": kind,
                    "n": len(mine),
                }
                dist.update({lab: (mine.count(lab) / len(mine) if mine else None) for lab in CLAIM_LABELS})
                report.claims.append(dist)

    def label_of(method: str, which: str, kind: str) -> list[str]:
        return [lab for (_, m, w, k, _), lab in zip(claim_pairs, labels, strict=True)
                if m == method and w == which and k == kind]  # fmt: skip

    ppl: dict[tuple[str, str, str], float | None] = {}
    if (config.perplexity_model / "config.json").is_file():
        keys = list(passages)
        ppl = dict(
            zip(keys, _perplexities(config.perplexity_model, [passages[k] for k in keys]), strict=True)
        )
    else:
        report.notes.append(f"naturalness skipped: no causal LM at {config.perplexity_model} "
                            "(keproxy train editor converts SmolLM2 there)")  # fmt: skip
    for method in methods:
        internal_pairs = [p for case in cases for w in ("main", "related")
                          for p in _sentence_pairs(passages[(case.case_id, method, w)])]  # fmt: skip
        cross_pairs = [p for case in cases for p in _sentence_pairs(passages[(case.case_id, method, "main")],
                                                                     passages[(case.case_id, method, "related")])]  # fmt: skip
        contradicts = _contradictions(nli, [*internal_pairs, *cross_pairs])
        texts = [
            (case, w, passages[(case.case_id, method, w)]) for case in cases for w in ("main", "related")
        ]
        entity = {"main": lambda c: c.subject, "related": lambda c: c.related}
        vectors = embedder.encode([t for _, _, t in texts])
        names = embedder.encode([entity[w](c) for c, w, _ in texts])
        ratings = [survey.get(f"{c.case_id}|{method}") for c in cases] if survey else []
        row: dict[str, Any] = {
            "method": LEME_METHODS[method][0],
            "edit_consistency_main": _share(label_of(method, "main", "new fact"), {"supports"}),
            "edit_consistency_related": _share(label_of(method, "related", "new fact"), {"supports", "neutral"}),
            "factual_consistency": _share(label_of(method, "main", "ground truth") + label_of(method, "related", "ground truth"),
                                          {"supports", "neutral"}),
            "old_fact_supported": _share(label_of(method, "main", "old fact"), {"supports"}),
            "internal_consistency": 1 - sum(contradicts[: len(internal_pairs)]) / len(internal_pairs) if internal_pairs else None,
            "cross_passage_consistency": 1 - sum(contradicts[len(internal_pairs):]) / len(cross_pairs) if cross_pairs else None,
            "topicality_mention": sum(_mentions(t, entity[w](c)) for c, w, t in texts) / len(texts),
            "topicality_cosine": float(np.mean(np.sum(vectors * names, axis=1))),
            "perplexity": _mean([ppl.get((c.case_id, method, w)) for c, w, _ in texts]) if ppl else None,
            "mean_words": float(np.mean([len(t.split()) for _, _, t in texts])),
            "n_passages": len(texts), "n_internal_pairs": len(internal_pairs), "n_cross_pairs": len(cross_pairs),
        }  # fmt: skip
        if survey:
            valid = [r for r in ratings if r is not None]
            for dim in dict.fromkeys(SURVEY_DIMENSIONS):
                cols = [i for i, d in enumerate(SURVEY_DIMENSIONS) if d == dim]
                row[f"survey_{dim}"] = _mean([float(np.mean([r[i] for i in cols])) for r in valid])
            row["survey_unparsed"] = len(ratings) - len(valid)
        report.rows.append(row)


def _share(labels: Sequence[str], accepted: set[str]) -> float | None:
    return sum(lab in accepted for lab in labels) / len(labels) if labels else None


def _mentions(text: str, entity: str) -> bool:
    """Whether ``text`` names ``entity`` (case-insensitive; the full name or its last word of 4+ letters)."""
    lower = text.lower()
    last = entity.split()[-1].lower() if entity.split() else ""
    return entity.lower() in lower or (
        len(last) >= 4 and re.search(rf"\b{re.escape(last)}\b", lower) is not None
    )


def _contradictions(nli: Any, pairs: Sequence[tuple[str, str]]) -> list[bool]:
    """Whether contradiction is the NLI backend's top label for each sentence pair (either order)."""
    if not pairs:
        return []
    both = [*pairs, *((b, a) for a, b in pairs)]
    tops = np.asarray(nli.predict(both)).argmax(axis=1)
    n = len(pairs)
    return [bool(tops[i] == _CONTRADICTION or tops[n + i] == _CONTRADICTION) for i in range(n)]


def _pct(value: Any) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def claims_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The claim-classification distribution (%), a row per method, passage and claim kind."""
    lines = [
        "| Method | Passage | Claim | supports | neutral | contradicts | n |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['method']} | {r['passage']} | {r['claim']} | {_pct(r['supports'])} | {_pct(r['neutral'])} "
                     f"| {_pct(r['contradicts'])} | {r['n']} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def table_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """LEME's measures per method (consistency and topicality in %, perplexity, survey means on 1–7)."""
    survey = any("survey_edit" in r for r in rows)
    head = ("| Method | Edit cons. (main supports) | Edit cons. (related not contra.) | Factual cons. | Old fact "
            "supported | Internal cons. | Cross-passage cons. | Topicality (mention) | Topicality (cosine) "
            "| Perplexity | Words |")  # fmt: skip
    if survey:
        head += " Survey edit / factual / internal / cross / topical / fluency (1–7) |"
    lines = [head, "|---|" + "---:|" * (head.count("|") - 2)]
    for r in rows:
        ppl = "–" if r["perplexity"] is None else f"{r['perplexity']:.1f}"
        line = (f"| {r['method']} | {_pct(r['edit_consistency_main'])} | {_pct(r['edit_consistency_related'])} "
                f"| {_pct(r['factual_consistency'])} | {_pct(r['old_fact_supported'])} "
                f"| {_pct(r['internal_consistency'])} | {_pct(r['cross_passage_consistency'])} "
                f"| {_pct(r['topicality_mention'])} | {r['topicality_cosine']:.3f} | {ppl} | {r['mean_words']:.0f} |")  # fmt: skip
        if survey:
            dims = [r.get(f"survey_{d}") for d in dict.fromkeys(SURVEY_DIMENSIONS)]
            line += " " + " / ".join("–" if v is None else f"{v:.1f}" for v in dims)
            line += f" ({r['survey_unparsed']} unparsed) |"
        lines.append(line)
    return "\n".join(lines) + "\n"


def _csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["method"])
        writer.writeheader()
        writer.writerows(rows)


def _plot(claims: Sequence[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = [(r["method"], r["passage"], r["claim"]) for r in claims]
    fig, ax = plt.subplots(figsize=(max(8, 0.45 * len(groups)), 4.5))
    bottom = np.zeros(len(claims))
    for label, color in zip(CLAIM_LABELS, ("tab:green", "tab:gray", "tab:red"), strict=True):
        values = np.array([100 * (r[label] or 0) for r in claims])
        ax.bar(range(len(claims)), values, bottom=bottom, color=color, label=label)
        bottom += values
    ax.set_xticks(range(len(claims)), [f"{m.split(' (')[0]} · {p} · {c}" for m, p, c in groups], rotation=75,
                  ha="right", fontsize=7)  # fmt: skip
    ax.set_ylabel("% of claims")
    ax.set_title("LEME claim classification through keproxy")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _write_outputs(
    config: LemeEvalConfig,
    report: LemeEvalReport,
    gens: Sequence[_Gen],
    passages: Mapping[tuple[str, str, str], str],
) -> list[Path]:
    out = config.out
    (out / "claims.md").write_text(claims_markdown(report.claims), encoding="utf-8")
    (out / "table.md").write_text(table_markdown(report.rows), encoding="utf-8")
    _csv(report.claims, out / "claims.csv")
    _csv(report.rows, out / "table.csv")
    with (out / "passages.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["case_id", "method", "passage", "prompt", "text"])
        for g in gens:
            writer.writerow([g.case.case_id, g.method, g.passage, g.request.messages[0]["content"],
                             passages[(g.case.case_id, g.method, g.passage)]])  # fmt: skip
    summary = {"n": config.n, "requests": report.requests, "cached": report.cached,
               "edits_added": report.edits_added, "seconds": round(report.seconds, 1), "notes": report.notes,
               "claims": report.claims, "rows": report.rows}  # fmt: skip
    (out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    files = [
        out / n for n in ("claims.md", "claims.csv", "table.md", "table.csv", "passages.csv", "summary.json")
    ]
    if config.plots and report.claims:
        _plot(report.claims, out / "leme.png")
        files.append(out / "leme.png")
    return files
