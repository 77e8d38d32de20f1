"""A correction bundled with other sentences in one user turn, tagged sentence by sentence.

Users put a correction after a request or a question ("Can you add a line about parking? Btw the room is 310
now."). The turn tagger reads the whole turn, and the request can outweigh the correction. For a turn of
several sentences that the correction gate lets through but the turn tagger does not call a correction as a
whole, :func:`tag_bundled` tags each sentence on its own, with the same context, and the best sentence, when it
reaches the threshold, stands for the turn, its value spans moved to the turn's offsets.
The rest of the pipeline reads the whole turn as before: the stale tagger still has to relate the turn to an
earlier sentence (``stale_evidence``), which keeps a follow-up's own sentence ("our check-in isn't until
15:00"), read alone, from counting as a correction. A turn of one sentence, or one already passed as a whole,
costs no extra forward pass. (The gate is not read sentence by sentence: most ordinary turns of several
sentences have one that could be a correction on its own, and the forward passes that would cost bought little.)
"""

from __future__ import annotations

from collections.abc import Sequence

from keproxy.corrections.model import Tagged, Tagger
from keproxy.corrections.sentences import split_sentences

__all__ = ["tag_bundled"]

#: Turns longer than this (characters) are not split: a long text pasted by the user is not a bundled remark.
MAX_CHARS = 600


def tag_bundled(
    tagger: Tagger, inputs: Sequence[tuple[str, str]], tagged: Sequence[Tagged], threshold: float
) -> list[Tagged]:
    """``tagged`` (the turn tagger's results for ``inputs``, (turn, context) pairs), where each turn below
    ``threshold`` of at most :data:`MAX_CHARS` characters and two or more sentences is replaced by its
    best-scoring sentence's result when that reaches ``threshold`` (spans in the turn's character offsets).
    One batched tagger call for every sentence of every such turn; blocking."""
    parts: list[tuple[int, int, int]] = []  # (input index, start, end)
    for k, ((text, _), result) in enumerate(zip(inputs, tagged, strict=True)):
        if result.score >= threshold or len(text) > MAX_CHARS:
            continue
        sentences = split_sentences(text)
        if len(sentences) >= 2:
            parts += [(k, a, b) for a, b in sentences]
    out = list(tagged)
    if not parts:
        return out
    results = tagger.tag([(inputs[k][0][a:b], inputs[k][1]) for k, a, b in parts])
    for (k, a, _), result in zip(parts, results, strict=True):
        if result.score >= threshold and result.score > out[k].score:
            spans = tuple((x + a, y + a, stem) for x, y, stem in result.spans)
            out[k] = Tagged(result.score, spans, result.confidence)
    return out
