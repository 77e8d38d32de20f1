"""A model post-editor's output projected onto the original response as a minimal edit.

A small generative editor (SmolLM2-135M) rewrites the whole response to change one value, and on long responses
it drops lines, stops early or rephrases what nobody corrected: data loss. :func:`minimal_edit` keeps only the
output's *small* changes: the two texts are aligned word by word (difflib), each changed hunk of at most
``max_words`` words on both sides is applied to the response (changes a word or two apart count as one hunk),
every longer hunk (a rewritten paragraph) and a deletion that ends the response (the output stopped early) are
ignored, and the response's own bytes stay everywhere else. Nothing small changed: None (retain).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

__all__ = ["minimal_edit"]

_TOKEN = re.compile(r"\S+|\s+")


def minimal_edit(response: str, output: str, *, max_words: int = 8, join_words: int = 2) -> str | None:
    """``response`` with the changed regions of ``output`` that span at most ``max_words`` words on each side;
    None when no such region changes anything. Changes separated by at most ``join_words`` unchanged words are one
    region (a rewritten sentence aligns as many small changes around shared words such as "the" or a date; as one
    region it is measured, and refused, whole). Whitespace is aligned too, so the response's line breaks and
    indentation survive unless a kept region changes them."""
    before, after = _TOKEN.findall(response), _TOKEN.findall(output)
    opcodes = difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()
    regions = _regions(opcodes, before, join_words)
    pieces: list[str] = []
    changed = False
    at = 0
    for i1, i2, j1, j2 in regions:
        pieces += before[at:i1]
        old, new = before[i1:i2], after[j1:j2]
        stopped = j2 == len(after) and i2 == len(before) and j2 - j1 < i2 - i1  # the output ended early
        if max(_words(old), _words(new)) <= max_words and not stopped and "".join(old) != "".join(new):
            pieces += new
            changed = True
        else:
            pieces += old
        at = i2
    pieces += before[at:]
    return "".join(pieces) if changed else None


def _regions(
    opcodes: Sequence[tuple[str, int, int, int, int]], before: list[str], join_words: int
) -> list[tuple[int, int, int, int]]:
    """The changed regions (i1, i2, j1, j2): runs of non-equal opcodes, joined across equal runs of at most
    ``join_words`` words."""
    regions: list[list[int]] = []
    for op, i1, i2, j1, j2 in opcodes:
        if op == "equal":
            continue
        if regions and _words(before[regions[-1][1] : i1]) <= join_words:
            regions[-1][1], regions[-1][3] = i2, j2
        else:
            regions.append([i1, i2, j1, j2])
    return [(a, b, c, d) for a, b, c, d in regions]


def _words(tokens: list[str]) -> int:
    return sum(1 for token in tokens if not token.isspace())
