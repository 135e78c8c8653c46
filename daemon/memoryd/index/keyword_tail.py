"""The tail: tokens of the rows the full-text indexes do not cover yet, scored in memory with BM25.

Rows are held per column as LanceDB tokenizes them (:func:`memoryd.index.keyword.tokenize_many`), so a
query matches a tail row exactly when it would match the row once indexed; scores use k1 1.2, b 0.75 and a
boost per column. Thread-safety: one writer (the store, under its write lock), many readers; a short lock
guards the maps.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

K1 = 1.2
B = 0.75


class KeywordTail:
    """Tokens of the rows not yet in the full-text indexes, per column (``columns`` in boost order)."""

    def __init__(self, columns: Sequence[str], boosts: Sequence[float]) -> None:
        self.columns = tuple(columns)
        self.boosts = tuple(boosts)
        self._lock = threading.Lock()
        # id -> per column (term -> frequency, length in tokens)
        self._rows: dict[str, tuple[tuple[Counter[str], int], ...]] = {}
        # per column: term -> {id: frequency}
        self._postings: list[dict[str, dict[str, int]]] = [{} for _ in self.columns]
        self._lengths = [0] * len(self.columns)

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, rid: object) -> bool:
        return rid in self._rows

    def ids(self) -> frozenset[str]:
        """The ids held now (a copy)."""
        with self._lock:
            return frozenset(self._rows)

    def put(self, rid: str, tokens: Sequence[Sequence[str]]) -> None:
        """Hold row ``rid`` with one token list per column (replacing an earlier version of it)."""
        per = tuple((Counter(t), len(t)) for t in tokens)
        with self._lock:
            self._remove(rid)
            self._rows[rid] = per
            for c, (tf, n) in enumerate(per):
                self._lengths[c] += n
                post = self._postings[c]
                for term, k in tf.items():
                    post.setdefault(term, {})[rid] = k

    def drop(self, ids: Iterable[str]) -> None:
        """Forget these rows (deleted, or now covered by the indexes)."""
        with self._lock:
            for rid in ids:
                self._remove(rid)

    def clear(self) -> None:
        with self._lock:
            self._rows.clear()
            self._postings = [{} for _ in self.columns]
            self._lengths = [0] * len(self.columns)

    def _remove(self, rid: str) -> None:
        per = self._rows.pop(rid, None)
        if per is None:
            return
        for c, (tf, n) in enumerate(per):
            self._lengths[c] -= n
            post = self._postings[c]
            for term in tf:
                hits = post.get(term)
                if hits is not None:
                    hits.pop(rid, None)
                    if not hits:
                        del post[term]

    def score_held(
        self,
        idf: dict[str, float],
        keep: Callable[[list[str]], set[str]],
        avg: Sequence[float] | None = None,
    ) -> tuple[frozenset[str], list[tuple[str, float]]]:
        """``(ids held, [(id, BM25)])`` from one look at the tail, so every id scored was held and every held
        id is named, however the tail changes meanwhile. The scores: held rows matching any token of ``idf``
        (token as the index makes it -> its IDF), best first; ``keep`` receives the matching ids and returns
        those that pass the filters. ``avg``: tokens per row of each column over every row (as LanceDB uses
        them); default: the tail's."""
        terms = list(idf)
        scores: dict[str, float] = {}
        with self._lock:
            held = frozenset(self._rows)
            count = len(self._rows)
            if not count or not terms:
                return held, []
            for c, boost in enumerate(self.boosts):
                mean = avg[c] if avg is not None and avg[c] > 0 else self._lengths[c] / count
                mean = max(mean, 1e-9)
                post = self._postings[c]
                for term in terms:
                    hits = post.get(term)
                    if not hits:
                        continue
                    w = boost * idf[term]
                    for rid, tf in hits.items():
                        norm = tf + K1 * (1 - B + B * self._rows[rid][c][1] / mean)
                        scores[rid] = scores.get(rid, 0.0) + w * tf * (K1 + 1) / norm
        if not scores:
            return held, []
        allowed = keep(list(scores))
        return held, sorted(((i, s) for i, s in scores.items() if i in allowed), key=lambda e: (-e[1], e[0]))
