"""Typo tolerance of the keyword half: the indexed terms a misspelled query term was meant to be.

A query word the index never saw ("pasword", "lgoin", "stagng") is neither a keyword hit nor a known word, so
on a small store, where the meaning list alone is rarely convincing, such a query found nothing. Each such
term is looked up here among the indexed terms (:attr:`memoryd.index.term_stats.TermStats.df`) within 1 edit
(terms of :data:`MIN_CHARS`-7 letters) or 2 (8 letters or more), and the search asks for the terms found as
well, in both of its keyword halves (LanceDB's index and the tail see the same terms).

An edit is a letter left out or added ("pasword", "manger") or two neighbours swapped ("lgoin", and a note's
"backpu" for "backup"); a letter replaced counts two, and the first letter must match. Those two rules are
what keeps a correctly spelled word from becoming another word: on small slices of the labelled data, plain
Damerau-Levenshtein turned "Nate" into "note"/"rate"/"date", "hike" into "like", "watch" into "match",
"writing" into "waiting", and let 2-14 times as many unrelated questions find something.

A query that is one CJK character (猫) stands for the indexed character pairs holding it (:meth:`Typos.containing`):
text in those scripts is indexed in overlapping pairs (:mod:`memoryd.index.terms`), so the character alone is
rarely a term. The pairs are kept by character as the statistics count them.

Lookup is a scan of the terms of the same first letter and a near length (a bucket each) with a vectorised
pre-filter: each term of letters only is kept with a 32-bin histogram of its characters; one edit changes
that histogram by at most 2 (L1), so only terms whose histogram is within ``2 * distance`` are compared
exactly. Well under a millisecond a term at 100,000 terms. Memory: 32 bytes and a string reference per term. Terms enter as the statistics first count them (keys of
``df`` are never removed, only counted down to 0, so the new ones are the keys past the last seen);
a term counted down to 0 is skipped at lookup.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping

import numpy as np

from memoryd.index.terms import CJK_CHAR as _CJK_CHAR

#: Shorter terms are never corrected, nor offered: one edit turns a short word into too many others.
MIN_CHARS = 4
#: From this length two edits are allowed.
TWO_EDITS_CHARS = 8
#: Longer terms are not held (identifiers, run-together words): a typo there is rare and costly to find.
MAX_CHARS = 24
BINS = 32
#: Most terms offered for one misspelled term (the nearest, then the most common).
MAX_OFFERS = 3
#: Most character pairs asked for one CJK character (the most common first): a particle (は) is in thousands.
MAX_PAIRS = 64


def max_edits(term: str) -> int:
    """Edits allowed between ``term`` and a term it may stand for: 0, 1 or 2."""
    n = len(term)
    if n < MIN_CHARS or n > MAX_CHARS or not term.isalpha():
        return 0
    return 2 if n >= TWO_EDITS_CHARS else 1


def _histogram(term: str) -> np.ndarray:
    h = np.zeros(BINS, dtype=np.int8)
    for ch in term:
        h[ord(ch) % BINS] += 1
    return h


def distance(a: str, b: str, bound: int) -> int:
    """Edits from ``a`` to ``b``, or ``bound + 1`` as soon as it must exceed ``bound``: a letter left out
    or added counts 1, two neighbours swapped 1, a letter replaced 2 (optimal string alignment)."""
    if abs(len(a) - len(b)) > bound:
        return bound + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 2
            v = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                v = min(v, prev2[j - 2] + 1)
            cur[j] = v
        if min(cur) > bound:
            return bound + 1
        prev2, prev = prev, cur
    return prev[-1]


class _Bucket:
    """Terms of one length and first letter and their histograms (rows past ``len(terms)`` are spare capacity)."""

    def __init__(self) -> None:
        self.terms: list[str] = []
        self.hist = np.zeros((16, BINS), dtype=np.int8)

    def add(self, term: str) -> None:
        n = len(self.terms)
        if n == len(self.hist):
            self.hist = np.concatenate([self.hist, np.zeros_like(self.hist)])
        self.hist[n] = _histogram(term)
        self.terms.append(term)


class Typos:
    """The indexed terms by length, following a statistics' ``df`` (see the module docstring).
    Thread-safe: lookups may run on several threads while the writer counts new terms."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buckets: dict[tuple[int, str], _Bucket] = {}
        self._df: Mapping[str, int] | None = None
        self._seen = 0
        self._pairs: dict[str, list[str]] = {}  # CJK character -> indexed pairs holding it

    def near(self, term: str, df: Mapping[str, int]) -> list[str]:
        """Up to :data:`MAX_OFFERS` terms with ``df > 0`` that ``term`` (absent from ``df``) may be a
        misspelling of: the fewest edits first, then the most records; ``[]`` when none or when ``term``
        is too short, too long or not all letters (:func:`max_edits`)."""
        bound = max_edits(term)
        if not bound:
            return []
        h = _histogram(term)
        found: list[tuple[int, int, str]] = []
        with self._lock:
            self._follow(df)
            for n in range(len(term) - bound, len(term) + bound + 1):
                bucket = self._buckets.get((n, term[0]))
                if bucket is None:
                    continue
                count = len(bucket.terms)
                close = np.abs(bucket.hist[:count] - h).sum(axis=1) <= 2 * bound
                for k in np.flatnonzero(close):
                    t = bucket.terms[k]
                    if t == term or max_edits(t) == 0:
                        continue
                    d = distance(term, t, bound)
                    if d <= bound and df.get(t, 0) > 0:
                        found.append((d, -df[t], t))
        return [t for _, _, t in sorted(found)[:MAX_OFFERS]]

    def containing(self, char: str, df: Mapping[str, int]) -> list[str]:
        """Up to :data:`MAX_PAIRS` indexed two-character CJK terms (``df > 0``) holding ``char``, the most
        records first; ``[]`` for anything but one CJK character."""
        if len(char) != 1 or not _CJK_CHAR.match(char):
            return []
        with self._lock:
            self._follow(df)
            pairs = list(self._pairs.get(char, ()))
        live = [(-df.get(t, 0), t) for t in pairs if df.get(t, 0) > 0]
        return [t for _, t in sorted(live)[:MAX_PAIRS]]

    def _follow(self, df: Mapping[str, int]) -> None:
        # a new statistics object (a reload) starts over; otherwise only keys added since the last look
        if df is not self._df:
            self._buckets.clear()
            self._pairs.clear()
            self._df, self._seen = df, 0
        if len(df) == self._seen:
            return
        try:
            new = list(itertools.islice(df, self._seen, None))
        except RuntimeError:  # the writer added a term meanwhile: the next lookup takes it
            return
        for t in new:
            if MIN_CHARS <= len(t) <= MAX_CHARS and t.isalpha():
                self._buckets.setdefault((len(t), t[0]), _Bucket()).add(t)
            elif len(t) == 2 and _CJK_CHAR.match(t[0]) and _CJK_CHAR.match(t[1]):
                for ch in set(t):
                    self._pairs.setdefault(ch, []).append(t)
        self._seen += len(new)
