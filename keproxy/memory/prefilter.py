"""A lexical prefilter of retrieval: a query that shares no word key with any edit it may see skips the encoder.

Embedding a query (MiniLM, ~5-20 ms of CPU) is the cost of a retrieval; the search over 1,000 edits is ~0.1 ms.
Most requests of a chat proxy are about nothing the tenant edited. :class:`LexicalPrefilter` keeps, per index
tag ``(tenant, scope, scope_id)``, how many edits carry each *key*; a query whose keys meet none of the keys
of the tags its requester may see cannot be about one of those edits in the lexical sense, and retrieval
returns nothing for it without embedding it.

Keys (:func:`lexical_keys`): the lower-cased ``\\w+`` words of the text, numbers whole, other words of 3 or
more letters that are not English function words, cut to their first 5 characters (a crude stem, so
"languages"/"language", "French"/"France", "elected"/"election" meet). An edit's keys come from its embedded
text (``Edit.query_text``), its subject and its targets. Text in scripts written without spaces (Chinese,
Japanese, Thai, ...) gets no keys: an edit with no keys is a candidate for every query of its requesters,
and a query with no keys is always embedded, so such text never loses a match. Session-scoped edits get no
keys either (a session holds a few, mostly corrections, whose text is the corrected span: a later question
about the story shares no word with '"Her brother Tobias" is wrong: it is "Her cousin Lev".'), so a
request of a session with edits always runs the encoder; the prefilter saves the work of requests whose
global and user edits are about other things.

The trade-off: retrieval by embedding also finds edits that share no word with the query (a paraphrase with
other words); those the prefilter drops. ``bench/memory_recall.py`` measures the loss (CounterFact paraphrase
queries, ELKEN scope questions); the setting ``retrieval_prefilter: off`` turns the prefilter off.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable

from keproxy.memory.edits import Edit
from keproxy.memory.index import Tag

__all__ = ["LexicalPrefilter", "lexical_keys"]

_WORD = re.compile(r"\w+")
# scripts written without spaces between words: a \w+ run there is a phrase, not a word
_UNSPACED = re.compile(
    r"[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
)
_STEM = 5
_STOPWORDS = frozenset(
    [
        "the",
        "and",
        "for",
        "are",
        "but",
        "not",
        "you",
        "all",
        "any",
        "can",
        "had",
        "her",
        "was",
        "one",
        "our",
        "out",
        "has",
        "him",
        "his",
        "how",
        "its",
        "who",
        "did",
        "get",
        "may",
        "say",
        "she",
        "too",
        "use",
        "yes",
        "that",
        "this",
        "with",
        "have",
        "from",
        "they",
        "will",
        "would",
        "there",
        "their",
        "what",
        "when",
        "where",
        "which",
        "while",
        "whom",
        "whose",
        "why",
        "about",
        "above",
        "after",
        "again",
        "against",
        "also",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "could",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "further",
        "here",
        "hers",
        "herself",
        "himself",
        "into",
        "itself",
        "just",
        "more",
        "most",
        "myself",
        "nor",
        "off",
        "once",
        "only",
        "other",
        "ours",
        "ourselves",
        "over",
        "own",
        "same",
        "should",
        "some",
        "such",
        "than",
        "then",
        "theirs",
        "them",
        "themselves",
        "these",
        "those",
        "through",
        "under",
        "until",
        "very",
        "were",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "is",
        "be",
        "an",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "as",
        "or",
        "it",
        "me",
        "my",
        "we",
        "us",
        "do",
        "if",
        "so",
        "no",
        "up",
        "am",
        "he",
        "tell",
        "know",
        "please",
        "like",
        "want",
        "need",
        "make",
        "let",
        "give",
        "show",
        "said",
        "says",
        "thing",
        "things",
        "something",
        "anything",
        "much",
        "many",
        "lot",
        "well",
        "now",
        "still",
        "ever",
        "even",
        "really",
    ]
)


def lexical_keys(text: str) -> frozenset[str]:
    """The keys of ``text`` (see the module docstring); empty for text in a script without spaces."""
    if _UNSPACED.search(text):
        return frozenset()
    keys: set[str] = set()
    for word in _WORD.findall(text.lower()):
        if word.isdigit():
            keys.add(word)
        elif len(word) >= 3 and word not in _STOPWORDS:
            keys.add(word[:_STEM])
    return frozenset(keys)


def edit_keys(edit: Edit) -> frozenset[str]:
    """The keys of an edit: of its embedded text, subject and targets."""
    parts = [edit.query_text, edit.subject or "", edit.target_new or "", edit.target_true or ""]
    if any(_UNSPACED.search(p) for p in parts):
        return frozenset()
    return frozenset().union(*(lexical_keys(p) for p in parts))


class LexicalPrefilter:
    """Keys of the indexed edits per tag; :meth:`may_match` tells whether a query can reach any of them.

    Not thread-safe on its own: :class:`~keproxy.memory.EditMemory` calls it under its lock. Memory: one
    entry per (edit, key), ~10 keys per CounterFact edit.
    """

    def __init__(self) -> None:
        self._tags_of_key: dict[str, Counter[Tag]] = {}
        self._edits: dict[str, tuple[Tag, frozenset[str]]] = {}
        self._unkeyed: Counter[Tag] = Counter()
        self.queries = 0
        """Queries checked by :meth:`may_match`."""
        self.skipped = 0
        """Queries :meth:`may_match` turned away."""

    def __len__(self) -> int:
        return len(self._edits)

    def put(self, edit: Edit, tag: Tag) -> None:
        """Index (or re-index) ``edit`` under ``tag``."""
        self.remove([edit.id])
        # a session's edits are few and mostly corrections ('"X" is wrong: it is "Y".'), whose words are the
        # corrected span's, not those of later questions about it: they are candidates for every query
        keys = frozenset() if edit.scope == "session" else edit_keys(edit)
        self._edits[edit.id] = (tag, keys)
        if not keys:
            self._unkeyed[tag] += 1
        for key in keys:
            self._tags_of_key.setdefault(key, Counter())[tag] += 1

    def remove(self, edit_ids: Iterable[str]) -> None:
        """Forget these edits (unknown ids are ignored)."""
        for edit_id in edit_ids:
            entry = self._edits.pop(edit_id, None)
            if entry is None:
                continue
            tag, keys = entry
            if not keys:
                self._unkeyed[tag] -= 1
                if self._unkeyed[tag] <= 0:
                    del self._unkeyed[tag]
            for key in keys:
                tags = self._tags_of_key[key]
                tags[tag] -= 1
                if tags[tag] <= 0:
                    del tags[tag]
                    if not tags:
                        del self._tags_of_key[key]

    def clear(self) -> None:
        """Forget every edit."""
        self._tags_of_key.clear()
        self._edits.clear()
        self._unkeyed.clear()

    def may_match(self, query: str, tags: Collection[Tag]) -> bool:
        """False when ``query`` shares no key with any edit under ``tags`` and none of those edits lacks keys
        (then no edit visible to the requester can match it lexically); True otherwise, and always for a
        query with no keys."""
        self.queries += 1
        if any(self._unkeyed.get(tag) for tag in tags):
            return True
        keys = lexical_keys(query)
        if not keys:
            return True
        for key in keys:
            holders = self._tags_of_key.get(key)
            if holders and any(tag in holders for tag in tags):
                return True
        self.skipped += 1
        return False
