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
  values equal to o left out) — as *supports* / *neutral* / *contradicts* under the rule ``claim_rule``
  (default ``sentences``, :data:`keproxy.eval.leme.metrics.CLAIM_RULES`): each sentence of the passage is judged
  alone, supports when the NLI model's top label is entailment for one of them, contradicts when it is
  contradiction for one and none entails, neutral otherwise. ``keproxy eval leme-agreement`` measures each
  rule against LEME's human annotations (:mod:`keproxy.eval.leme.validate`). The distribution per method,
  claim kind and passage is the main table (Fig. 4's layout);
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

import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from keproxy.eval.core.answers import PromptRequest, fetch_answers
from keproxy.eval.core.cache import AnswerCache
from keproxy.eval.core.outputs import RunOutputs
from keproxy.eval.core.proxy import HarnessError, default_model, serve_proxy
from keproxy.eval.core.urls import ProxyRoot
from keproxy.eval.leme.data import LemeCase, load_leme
from keproxy.eval.leme.metrics import (
    CLAIM_LABELS,
    SURVEY_DIMENSIONS,
    SURVEY_QUESTIONS,
    ClaimRuleName,
    classify_claims,
    contradictions,
    mean_of,
    mentions_entity,
    parse_survey,
    perplexities,
    sentence_pairs,
    share_of,
)
from keproxy.eval.leme.report import claims_markdown, plot_claims, table_markdown

__all__ = ["LEME_METHODS", "LemeEvalConfig", "LemeEvalReport", "run_leme_eval"]

LemeMethod = Literal["none", "prompt", "ike", "postedit"]
LEME_METHODS: dict[str, tuple[str, str]] = {  # key -> (table label, keproxy edit_mode)
    "none": ("no edit", "off"),
    "prompt": ("PROMPT", "prompt"),
    "ike": ("IKE", "ike"),
    "postedit": ("postEdit (server's post-editor)", "postedit"),
}
_ORDER: tuple[LemeMethod, ...] = ("none", "prompt", "ike", "postedit")
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
    claim_rule: ClaimRuleName = Field(
        default="sentences", description="Claim rule (keproxy.eval.leme.metrics.CLAIM_RULES)."
    )
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
    labels = classify_claims(
        nli, [(passages[(c, m, w)], claim) for c, m, w, _, claim in claim_pairs], config.claim_rule
    )
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
        ppl = dict(zip(keys, perplexities(config.perplexity_model, [passages[k] for k in keys]), strict=True))
    else:
        report.notes.append(f"naturalness skipped: no causal LM at {config.perplexity_model} "
                            "(keproxy train editor converts SmolLM2 there)")  # fmt: skip
    for method in methods:
        internal_pairs = [p for case in cases for w in ("main", "related")
                          for p in sentence_pairs(passages[(case.case_id, method, w)])]  # fmt: skip
        cross_pairs = [p for case in cases for p in sentence_pairs(passages[(case.case_id, method, "main")],
                                                                   passages[(case.case_id, method, "related")])]  # fmt: skip
        contradicts = contradictions(nli, [*internal_pairs, *cross_pairs])
        texts = [
            (case, w, passages[(case.case_id, method, w)]) for case in cases for w in ("main", "related")
        ]
        entity = {"main": lambda c: c.subject, "related": lambda c: c.related}
        vectors = embedder.encode([t for _, _, t in texts])
        names = embedder.encode([entity[w](c) for c, w, _ in texts])
        ratings = [survey.get(f"{c.case_id}|{method}") for c in cases] if survey else []
        row: dict[str, Any] = {
            "method": LEME_METHODS[method][0],
            "edit_consistency_main": share_of(label_of(method, "main", "new fact"), {"supports"}),
            "edit_consistency_related": share_of(label_of(method, "related", "new fact"), {"supports", "neutral"}),
            "factual_consistency": share_of(label_of(method, "main", "ground truth") + label_of(method, "related", "ground truth"),
                                            {"supports", "neutral"}),
            "old_fact_supported": share_of(label_of(method, "main", "old fact"), {"supports"}),
            "internal_consistency": 1 - sum(contradicts[: len(internal_pairs)]) / len(internal_pairs) if internal_pairs else None,
            "cross_passage_consistency": 1 - sum(contradicts[len(internal_pairs):]) / len(cross_pairs) if cross_pairs else None,
            "topicality_mention": sum(mentions_entity(t, entity[w](c)) for c, w, t in texts) / len(texts),
            "topicality_cosine": float(np.mean(np.sum(vectors * names, axis=1))),
            "perplexity": mean_of([ppl.get((c.case_id, method, w)) for c, w, _ in texts]) if ppl else None,
            "mean_words": float(np.mean([len(t.split()) for _, _, t in texts])),
            "n_passages": len(texts), "n_internal_pairs": len(internal_pairs), "n_cross_pairs": len(cross_pairs),
        }  # fmt: skip
        if survey:
            valid = [r for r in ratings if r is not None]
            for dim in dict.fromkeys(SURVEY_DIMENSIONS):
                cols = [i for i, d in enumerate(SURVEY_DIMENSIONS) if d == dim]
                row[f"survey_{dim}"] = mean_of([float(np.mean([r[i] for i in cols])) for r in valid])
            row["survey_unparsed"] = len(ratings) - len(valid)
        report.rows.append(row)


def _write_outputs(
    config: LemeEvalConfig,
    report: LemeEvalReport,
    gens: Sequence[_Gen],
    passages: Mapping[tuple[str, str, str], str],
) -> list[Path]:
    outputs = RunOutputs(config.out)
    outputs.text("claims.md", claims_markdown(report.claims))
    outputs.csv_dicts("claims.csv", report.claims)
    outputs.text("table.md", table_markdown(report.rows))
    outputs.csv_dicts("table.csv", report.rows)
    passage_rows = [[g.case.case_id, g.method, g.passage, g.request.messages[0]["content"],
                     passages[(g.case.case_id, g.method, g.passage)]] for g in gens]  # fmt: skip
    outputs.csv_rows("passages.csv", ("case_id", "method", "passage", "prompt", "text"), passage_rows)
    summary = {"n": config.n, "requests": report.requests, "cached": report.cached,
               "edits_added": report.edits_added, "seconds": round(report.seconds, 1), "notes": report.notes,
               "claims": report.claims, "rows": report.rows}  # fmt: skip
    outputs.json("summary.json", summary)
    if config.plots and report.claims:
        outputs.write("leme.png", lambda path: plot_claims(report.claims, path))
    return outputs.files
