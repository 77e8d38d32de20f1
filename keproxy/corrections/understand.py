"""Correction understanding end to end: detect -> extract -> locate -> rewrite, with the learned taggers.

:class:`CorrectionUnderstanding` reads a chat and returns its corrections, each with the exact stale spans it
makes false and their replacements (:class:`~keproxy.corrections.base.SpanEdit`), so the ``patch`` strategy changes
those characters and nothing else:

0. **gate**: a linear n-gram model (:mod:`keproxy.corrections.gate`, ~1 ms a turn) lets through the user turns
   (after the first) that could be corrections; ordinary requests and questions stop there, with no forward pass.
1. **detect + extract**: the turn tagger reads each user turn the gate let through with its recent history and
   says whether it corrects something, tagging the new (and, when named, old) values. A filled KEIC template
   (App. B.2) is a fast path: its quoted [O] / [N] are taken as they are. The turn's own words complete what
   the tagger read (:mod:`keproxy.corrections.anchors`, :mod:`keproxy.corrections.spelling`); with ``bundled``,
   a turn of several sentences it does not call a correction is read sentence by sentence
   (:mod:`keproxy.corrections.bundled`).
2. **locate**: the sentences of the earlier user and assistant turns go to the stale tagger with the correcting
   turn (:mod:`keproxy.corrections.candidates`: those naming an old value or holding a value of the new value's
   kind, when each value is found so; else at most ``max_candidates``, those sharing the most words and value
   kinds with it first); it tags the words each sentence must change.
3. **rewrite**: each tagged span becomes the correction's new value fitted to it
   (:func:`keproxy.corrections.rewrite.replacement`). A new value that restates a whole clause (five words or
   more, as KEIC templates 10-15 do) must then stand in the sentence word for word; when the word-level edit
   does not achieve that (a reworded fact), the clause it replaces is found by
   :class:`~keproxy.corrections.locate.SpanLocator` among the sentences the stale tagger flagged, and replaced whole.
4. **relate**: a detected turn (not a KEIC template) with no located span counts only when the stale tagger gives an
   earlier sentence at least ``stale_evidence``: a turn that makes nothing earlier false adds or asks.

Never raises on odd input (a message without text is skipped). Thread-safe; blocking (runs models).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from keproxy.corrections.anchors import (
    anchored_edits,
    named_over_tagged,
    old_beside,
    split_joined,
    unextracted,
    within_named_clauses,
)
from keproxy.corrections.base import Correction, CorrectionDetector, SpanEdit
from keproxy.corrections.bounds import narrow
from keproxy.corrections.bundled import tag_bundled
from keproxy.corrections.candidates import stale_candidates
from keproxy.corrections.claims import reported_claim
from keproxy.corrections.clauses import clause_value, restated_clause, restates, said_with, unstated_value
from keproxy.corrections.consolidate import (
    Found,
    current,
    named_anywhere,
    one_fact,
    propagate,
    restated,
    standalone,
    typed_candidates,
    untagged_candidates,
)
from keproxy.corrections.counts import (
    counted,
    labelled,
    last_mentioned,
    number_word_copies,
    terse,
    written_like_new,
)
from keproxy.corrections.detect.template_parser import parse_template
from keproxy.corrections.fit import support
from keproxy.corrections.follow_on import follow_on_edits
from keproxy.corrections.formats import clashing_kinds
from keproxy.corrections.gate import CorrectionGate
from keproxy.corrections.grammar import capitalised
from keproxy.corrections.locate import SpanLocator
from keproxy.corrections.located import located_edits
from keproxy.corrections.model import MODELS_DIR, Tagger
from keproxy.corrections.retyped import retyped
from keproxy.corrections.rewrite import shape
from keproxy.corrections.siblings import labelled_copies, old_in_new_form, one_value_per_sentence
from keproxy.corrections.spans import (
    find_all,
    fold,
    named_in_full,
    named_spans,
    one_fact_each,
    oriented,
    paired_values,
    quoted_old_values,
    realised,
    same_dates,
    same_form,
    stated_changes,
    within_sentence,
    words_within,
)
from keproxy.corrections.spelling import near_spelling
from keproxy.corrections.tagging import context_of, snap_to_words
from keproxy.corrections.units import measured_as_other, measured_otherwise
from keproxy.messages import message_text

if TYPE_CHECKING:
    from keproxy.corrections.detect.registry import DetectorResources

__all__ = ["CorrectionUnderstanding", "UnderstandingOptions"]


class UnderstandingOptions(BaseModel):
    """Options of the learned pipeline (the ``learned_detector`` setting)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    detect_threshold: float = Field(default=0.5, ge=0, le=1)
    """P(correction) from which a user turn is a correction."""
    stale_threshold: float = Field(default=0.5, ge=0, le=1)
    """P(stale) from which a sentence's tagged words are rewritten."""
    propagate_threshold: float = Field(default=0.1, ge=0, le=1)
    """P(stale) of a sentence from which a copy of a found stale value that is not distinctive (a weekday, a
    small number) is as stale (:func:`keproxy.corrections.consolidate.propagate`)."""
    max_candidates: int = Field(default=24, ge=1)
    """Earlier sentences sent to the stale tagger per correcting turn (the most related first)."""
    patterns: bool = True
    """Use the KEIC-template fast path (quoted [O] / [N]) and verbatim multi-word old values."""
    reported_claims: bool = True
    """Skip user turns that report another person's claim with doubt ("my friend insists it's Sydney, not
    Canberra. Who's right?"; :func:`keproxy.corrections.claims.reported_claim`); a KEIC template turn is never
    skipped."""
    stale_evidence: float = Field(default=0.03, ge=0, le=1)
    """A turn the turn tagger reads as a correction (not a KEIC template) counts only when a stale span is located
    or the stale tagger gives an earlier sentence at least this P(stale): a turn that relates to nothing said
    earlier ("by the way, the lot number was 4471B, please add it") adds or asks, it corrects nothing. 0: the
    turn tagger alone decides. On the corpus's train split, 99.6% of the sentences holding a stale span score at
    least 0.03 and three in four of the others below 0.008."""
    bundled: bool = False
    """Also tag each sentence of a turn of several that the turn tagger does not call a correction as a whole (a
    correction after a request: :mod:`keproxy.corrections.bundled`). Off by default: it finds such corrections
    but also reads a few look-alikes' sentences as corrections (4 of the corpus train split's 1,523 negatives)."""
    named_first: bool = True
    """Send the stale tagger only the earlier sentences that could state what the turn corrects (a named old
    value in any of its formats; for a new value alone, a number, weekday or month like it) when each value is
    found so (:func:`keproxy.corrections.candidates.stale_candidates`)."""
    gate: bool = True
    """Send only the user turns the correction gate (:mod:`keproxy.corrections.gate`) lets through to the turn
    tagger (a KEIC template turn always goes); False: every user turn after the first."""


class CorrectionUnderstanding:
    """The learned correction pipeline (see the module docstring); a ``CorrectionDetector`` named "learned".

    turn_tagger / stale_tagger: default the adapters shipped in ``keproxy/data/models`` (raises
    TaggerMissingError at construction when absent), on ``runtime`` with ``threads`` intra-op threads
    (:class:`~keproxy.corrections.model.Tagger`'s arguments; None: its defaults). locator: the clause locator for
    restated sentences (default: ``SpanLocator(None)``, lexical; give it the app's embedder for the embedding
    score). gate: the correction gate in front of the turn tagger when ``options.gate`` (default: the shipped
    one; raises GateMissingError at construction when absent).
    """

    name = "learned"
    blocking = True
    fallback = False

    def __init__(
        self,
        turn_tagger: Tagger | None = None,
        stale_tagger: Tagger | None = None,
        options: UnderstandingOptions | None = None,
        *,
        locator: SpanLocator | None = None,
        threads: int | None = None,
        runtime: str | None = None,
        gate: CorrectionGate | None = None,
    ) -> None:
        self.turn_tagger = turn_tagger or Tagger(MODELS_DIR / "turn-tagger", threads=threads, runtime=runtime)
        self.stale_tagger = stale_tagger or Tagger(
            MODELS_DIR / "stale-tagger", threads=threads, runtime=runtime
        )
        self.options = options or UnderstandingOptions()
        self.locator = locator or SpanLocator(None)
        self.gate = (gate or CorrectionGate()) if self.options.gate else None

    def _tagged_turns(self, messages: Sequence[Mapping[str, Any]]) -> tuple[list[int], list[str]]:
        """(the user turns after the first that the gate, the templates and the reported-claim rule leave to the
        taggers, every message's text)."""
        if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
            return [], []
        texts = [message_text(m) if isinstance(m, Mapping) else "" for m in messages]
        turns = [
            i for i, m in enumerate(messages)
            if i >= 1 and isinstance(m, Mapping) and m.get("role") == "user" and texts[i].strip()
        ]  # fmt: skip
        if self.gate is not None and turns:
            passes = self.gate.passes([texts[i] for i in turns])
            turns = [
                i for i, ok in zip(turns, passes, strict=True)
                if ok or (self.options.patterns and parse_template(texts[i]))
            ]  # fmt: skip
        if self.options.reported_claims:
            turns = [i for i in turns if not reported_claim(texts[i]) or parse_template(texts[i])]
        return turns, texts

    def screen(self, messages: Sequence[Mapping[str, Any]]) -> bool:
        """False when :meth:`detect` would run no model (the gate stops every user turn): ~0.1 ms a new turn, so
        the pipeline asks it on the event loop and sends :meth:`detect` to a worker thread only when True."""
        return bool(self._tagged_turns(messages)[0])

    def detect(self, messages: Sequence[Mapping[str, Any]]) -> list[Correction]:
        """Corrections of every user turn after the first, in turn order, each with its span edits."""
        turns, texts = self._tagged_turns(messages)
        if not turns:
            return []
        inputs = [(texts[i], context_of(messages, i)) for i in turns]
        tagged = self.turn_tagger.tag(inputs)
        if self.options.bundled:
            tagged = tag_bundled(self.turn_tagger, inputs, tagged, self.options.detect_threshold)
        out: list[Correction] = []
        for turn, result in zip(turns, tagged, strict=True):
            values = self._values(texts[turn], result, " ".join(texts[:turn]))
            if result.score < self.options.detect_threshold and not values[1]:
                continue
            pairs, template = values
            spans = self._locate(messages, texts, turn, pairs, {c.turn_index for c in out}) if pairs else []
            if template is None:  # values the tagger did not extract, named like earlier ones ("avg HR 152")
                earlier = [i for i in range(turn) if messages[i].get("role") in ("user", "assistant")]
                extra, more = unextracted(texts, earlier, turn, pairs, spans)
                more += labelled_copies(texts, earlier, [*spans, *more])
                pairs, spans = [*pairs, *extra], [*spans, *more]
            settled = template or spans or not self.options.stale_evidence
            if not (settled or self._flags(messages, turn, {c.turn_index for c in out})):
                continue  # nothing said earlier is stale: an addition, a request, an opinion corrects nothing
            if not pairs:
                out.append(Correction(turn, None, texts[turn], self.name, result.score))
                continue
            for k, (old, new) in enumerate(pairs):
                mine = tuple(s for s in spans if s.correction == k)
                out.append(Correction(turn, old, new, self.name, max(result.score, 0.9 if template else 0.0),
                                      template, mine))  # fmt: skip
        return out

    def make_consistent(
        self, text: str, fact: str, values: Sequence[tuple[str | None, str]] = ()
    ) -> list[SpanEdit]:
        """Locate and rewrite as one operation: the spans of ``text`` that ``fact`` makes false, each with its
        minimal replacement, so that ``text`` agrees with ``fact`` and every other character stays.

        The same steps as :meth:`detect`'s locate and rewrite, with ``fact`` in the place of the correcting
        user turn and ``text`` as the only earlier turn: the history patch and the answer post-edit
        (``located`` post-editor) are this one job on different text. values: the fact's (old, new) pairs when
        known (a triple edit's o and o*, old may be None); empty: a change the fact spells out whose old value
        ``text`` states (:func:`~keproxy.corrections.spans.stated_changes`, with patterns on), else what the turn
        tagger extracts from ``fact``. Returns span edits with ``turn_index`` 0 and offsets into ``text``; empty
        when nothing must change (postEdit's ``<Retain>``). Blocking (runs the taggers); never raises.
        """
        if not text.strip() or not fact.strip():
            return []
        messages = [{"role": "assistant", "content": text}, {"role": "user", "content": fact}]
        pairs = [(old, new) for old, new in values if new and new.strip()]
        pairs = pairs or (stated_changes(fact, text) if self.options.patterns else [])
        if not pairs:
            (result,) = self.turn_tagger.tag([(fact, context_of(messages, 1))])
            pairs = self._values(fact, result)[0]  # no history: the text may already hold the new value
        if not pairs:
            return []
        return self._locate(messages, [text, fact], 1, pairs, set())

    def _values(
        self, text: str, result: Any, history: str = ""
    ) -> tuple[list[tuple[str | None, str]], int | None]:
        """(old, new) pairs of a turn and its template number: a template's slots, else the tagged values
        (each new value paired with the old value tagged closest before or after it). history: the earlier turns."""
        written, history = history, fold(history)
        if self.options.patterns:
            parsed = parse_template(text)
            if parsed:
                return [(p.old, p.new) for p in parsed], parsed[0].template
        spans = [(a, within_sentence(text, a, b), stem) for a, b, stem in snap_to_words(text, result.spans)]
        news = [(named_in_full(text, a, b), b) for a, b, stem in spans if stem == "NEW"]  # "Pip's Playbarn"
        olds = [(a, b) for a, b, stem in spans if stem == "OLD"]

        def stated(span: tuple[int, int]) -> bool:
            # as a whole phrase: "4.7.2" is stated by "fixed in 4.7.2", not by "4.7.0" and "2 days"
            return f" {fold(text[span[0] : span[1]])} " in f" {history} "

        if len(news) > 1 and history:
            # a "new" value the history already states is the old one ("I wrote 9 cups, meant 7")
            seen = [n for n in news if stated(n)]
            if seen and len(seen) < len(news):
                news = [n for n in news if n not in seen]
                olds = olds + seen
        if len(olds) > 1 and history:
            # an "old" value the history never states beside one of its kind it does ("Sunday not Monday"): new
            unsaid = [o for o in olds if not stated(o)]
            kinds = {shape(text[a:b]) for a, b in olds if (a, b) not in unsaid}
            turned = [o for o in unsaid if shape(text[o[0] : o[1]]) in kinds]
            news, olds = sorted(news + turned), [o for o in olds if o not in turned]
        paired = paired_values(text, news, olds)
        pairs: list[tuple[str | None, str]] = []
        said = set(history.split())
        for i, (a, b) in enumerate(news):
            old = olds[paired[i]] if i in paired else None
            pair = oriented(text[old[0] : old[1]] if old else None, text[a:b], said)
            if pair[0] and (words_within(pair[0], pair[1]) or measured_otherwise(pair[0], pair[1])):
                # "Monday 10 March" restates "March"; "80%" is no old "1,000 cycles": not what changed
                pair = (None, pair[1])
            pairs.append(pair)

        # one value tagged twice ("no, 3691. INV-2024-3691"): the part goes, the whole value stays
        def inside(part: str, whole: str) -> bool:
            return part != whole and any(
                standalone(whole, at, at + len(part), loose=True) for at in find_all(whole, part)
            )

        pairs = [(old, new) for old, new in pairs if old or not any(inside(new, other) for _, other in pairs)]
        if not pairs and self.options.patterns and said:
            # tagged a correction without a value: a cue frame whose old value was said, new value of its kind
            pairs = [
                (o, n)
                for o, n in stated_changes(text, written)
                if o and any(shape(w) == shape(o) for w in n.split())
            ]
        # "1,350 and Q3 1,420": two values; "the host is cache-01": a typo fix of "cache-1"
        return old_beside(near_spelling(split_joined(pairs), text, written), text, history), None

    def _flags(self, messages: Sequence[Mapping[str, Any]], turn: int, skip: set[int]) -> bool:
        """Whether the stale tagger gives an earlier sentence ``options.stale_evidence`` against turn ``turn``."""
        text = message_text(messages[turn])
        candidates = self._candidates(messages, turn, text, skip)
        tagged = self.stale_tagger.tag([(text, message_text(messages[i])[a:b]) for i, a, b in candidates])
        return any(r.score >= self.options.stale_evidence for r in tagged)

    def _candidates(
        self,
        messages: Sequence[Mapping[str, Any]],
        turn: int,
        text: str,
        skip: set[int],
        pairs: Sequence[tuple[str | None, str]] = (),
    ) -> list[tuple[int, int, int]]:
        return stale_candidates(
            messages, turn, text, skip, pairs,
            max_candidates=self.options.max_candidates, named_first=self.options.named_first,
        )  # fmt: skip

    def _locate(
        self,
        messages: Sequence[Mapping[str, Any]],
        texts: Sequence[str],
        turn: int,
        pairs: Sequence[tuple[str | None, str]],
        skip: set[int],
    ) -> list[SpanEdit]:
        edits = quoted_old_values(messages, texts, turn, pairs, skip) if self.options.patterns else []
        candidates = self._candidates(messages, turn, texts[turn], skip, pairs)
        tagged = self.stale_tagger.tag([(texts[turn], texts[i][a:b]) for i, a, b in candidates])
        scores = {c: r.score for c, r in zip(candidates, tagged, strict=True)}

        def sentence_score(index: int, at: int) -> float:
            return max((p for (i, a, b), p in scores.items() if i == index and a <= at < b), default=0.0)

        flagged: list[tuple[int, int, int]] = []
        found: list[Found] = []
        for (index, a, b), result in zip(candidates, tagged, strict=True):
            if result.score < self.options.stale_threshold:
                continue
            flagged.append((index, a, b))
            sentence = texts[index][a:b]
            named = named_spans(sentence, pairs)
            own = {k for *_, k in named}
            by_tags = [t for t in one_fact_each(sentence, result, pairs, texts[turn]) if t[2] not in own]
            found += [Found(index, a + x, a + y, k, 1.0 + result.score, named=True) for x, y, k in named]
            for x, y, k in by_tags:
                x, y = same_form(sentence, x, y, pairs[k][1])
                found.append(Found(index, a + x, a + y, k, result.score * result.span_confidence(x, y)))
            for k, (old, new) in enumerate(pairs):
                for x, y in [] if old else untagged_candidates(sentence, result, pairs, new):
                    if not any(f.turn == index and f.start < a + y and a + x < f.end for f in found):
                        found.append(
                            Found(index, a + x, a + y, k, result.score * result.span_confidence(x, y))
                        )
        turns = [
            i for i in range(turn) if i not in skip and messages[i].get("role") in ("user", "assistant")
        ]  # fmt: skip
        found += named_anywhere(texts, turns, pairs, found, sentence_score, self.options.propagate_threshold)
        # a span joining several values ("10.0.4.71:6379") states the part written like the new value
        found = [
            replace(f, start=s, end=e)
            for f in found
            for s, e in [narrow(texts[f.turn], f.start, f.end, pairs[f.correction][1])]
        ]
        found = restated(current(found, texts, [new for _, new in pairs]), texts, texts[turn], pairs)
        if not found and len(pairs) == 1 and pairs[0][0] is None and terse(texts[turn], pairs[0][1]):
            # "Make it 7.": nothing flagged, the turn names nothing else: the value of its kind mentioned last
            found = last_mentioned(
                texts, turns, lambda text: typed_candidates(text, pairs[0][1]), pairs[0][1]
            )
        clashing = [
            f for f in found
            if clashing_kinds(texts[f.turn][f.start : f.end], pairs[f.correction][1])
            or measured_as_other(texts[f.turn], f.start, f.end, pairs[f.correction][1])
        ]  # fmt: skip
        found = [f for f in found if f not in clashing]
        found += retyped(texts, flagged, clashing, found, pairs)  # "$1,200" tagged, "15 March" meant
        for k, (old, new) in enumerate(pairs):
            if not old:  # "she's in coach D": nothing flagged, "coach C" is written like it
                found += written_like_new(texts, turns, found, k, new)
        found = counted(found, texts, pairs)
        found = labelled(found, texts, texts[turn], pairs)
        found = one_fact(found, texts, lambda f: support(f, texts, texts[turn], pairs[f.correction][1]))
        found = propagate(texts, turns, found, sentence_score, min_score=self.options.propagate_threshold)
        for f in sorted(found, key=lambda f: (f.turn, f.start, -f.weight)):
            old, new = pairs[f.correction]
            mine = located_edits(texts[f.turn], f.turn, f.start, f.end, old, new, f.correction)
            if not any(
                e.turn_index == f.turn and e.start < m.end and m.start < e.end for e in edits for m in mine
            ):
                edits += mine
        for k, (old, new) in enumerate(pairs):
            if len(new.split()) >= 5 and not realised(texts, edits, k, new):
                # the old clause's words, or its date written otherwise ("3 August" for "the 3rd of August")
                edits = [
                    e
                    for e in edits
                    if e.correction != k
                    or e.before.casefold() in (old or "").casefold()
                    or same_dates(e.before, old or "")
                ]
                edits += self._clause(messages, texts, turn, old, new, k, flagged, skip, edits)
        edits += number_word_copies(texts, turns, edits)
        edits = named_over_tagged(texts, turns, turn, pairs, edits)  # "the villa's £2,450": not the flights'
        edits += anchored_edits(texts, turns, turn, pairs, edits)  # facts named by words, nothing tagged
        edits = one_value_per_sentence(texts, edits)  # "6a, 6a+, 6b" under "the last one was a 6b+"
        edits += labelled_copies(texts, turns, edits)  # "avg HR 148", then "Avg HR: 148 bpm"
        edits += old_in_new_form(texts, turns, pairs, edits)  # "36-count, not 40": the text's "40-count"
        edits = within_named_clauses(texts, turn, pairs, edits)  # "pick-up ... gate 3, drop-off ... gate 3"
        return capitalised(texts, turn, edits + follow_on_edits(texts, turns, edits))

    def _clause(
        self,
        messages: Sequence[Mapping[str, Any]],
        texts: Sequence[str],
        turn: int,
        old: str | None,
        new: str,
        k: int,
        flagged: Sequence[tuple[int, int, int]],
        skip: set[int],
        edits: Sequence[SpanEdit],
    ) -> list[SpanEdit]:
        """The edits of a clause ``new`` not yet realised: when it holds one value the chat does not state yet
        (:func:`clause_value`, else :func:`unstated_value`), that value located as a short new value (the minimal
        edit: "The bake sale raised $1,420" changes "$1,240" and nothing else the sentence says), unless the
        clause is not realised by it and the locator is sure of a span the clause mostly restates and the value's
        edit does not say the clause there (:func:`said_with`); else, or when that finds nothing, the clause it
        restates, replaced whole (:func:`restated_clause`)."""
        history = " ".join(texts[:turn])
        value = None
        if not (old or any(e.correction == k for e in edits)):
            value = clause_value(new) or unstated_value(new, history)  # "$1,420"; "31 Hollow Lane"
        if value and fold(value) in fold(history):
            value = None  # the chat already says it: not what the clause changes ("on 5 June")
        args = (self.locator, messages, texts, turn, new, k, flagged, skip, edits)
        if not value:
            return restated_clause(*args)
        mine = self._locate(messages, texts, turn, [(None, value)], skip)
        taken = [(e.turn_index, e.start, e.end) for e in edits]
        mine = [  # inside a sentence the stale tagger relates to the clause, over nothing already edited
            replace(e, correction=k)
            for e in mine
            if any(t == e.turn_index and a <= e.start < b for t, a, b in flagged)
            and not any(t == e.turn_index and a < e.end and e.start < b for t, a, b in taken)
        ]
        if mine and realised(texts, [*edits, *mine], k, new):
            return mine  # the value was all the clause changed
        # a sure clause is taken when it mostly restates the span it replaces (KEIC's in-place [N]); a span that
        # says much more than the clause would lose it, and the value's edits are taken instead
        clause = restated_clause(*args, sure=True)
        if clause and all(restates(e.before, new) for e in clause):
            # unless the value changes inside each span and leaves at most one of the clause's words unsaid there
            # ("New router ships: Wednesday" for "the replacement ships on Wednesday"): the smaller edit
            return mine if mine and all(said_with(e, mine, new) for e in clause) else clause
        return mine or clause or restated_clause(*args)


def factory(resources: DetectorResources) -> CorrectionDetector:
    """The ``learned`` detector (``keproxy.corrections.detect.registry``): options from ``resources.learned``,
    the taggers' runtime and threads from ``resources.tagger_runtime`` / ``resources.threads``; new-only
    corrections located with the shared embedder when it is a real one."""
    from keproxy.memory.embeddings import Embedder

    encoder = resources.encoder
    locator = SpanLocator(encoder) if isinstance(encoder, Embedder) else None
    return CorrectionUnderstanding(
        options=UnderstandingOptions(**resources.learned), locator=locator, threads=resources.threads,
        runtime=resources.tagger_runtime,
    )  # fmt: skip
