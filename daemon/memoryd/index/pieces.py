"""A fixed vocabulary's piece (str) -> id look-up, held as a few flat arrays instead of Python objects.

The tokenizer (:mod:`memoryd.index.unigram`) looks up every substring of every word it has not cached;
a dict of its 250,002 pieces cost 36 MiB of Python strings and ints, this table ~7 MiB.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress

import numpy as np

_FEW = 64  # hits checked one by one rather than all at once (numpy's cost per call dominates below)


class PieceTable:
    """Piece (str) -> id for a fixed vocabulary, in flat arrays instead of Python objects.

    Each piece's Python ``hash()`` sorted (int64, with the ids in that order), the pieces' UTF-8 joined in
    one ``bytes`` with an offset and a length in characters per id: 250k pieces take ~7 MiB. A look-up
    searches the sorted hashes, then compares the pieces' characters, so the answer is exact. That check
    is needed: CPython hashes a str's internal buffer, so "pg" (two 1-byte characters) and "杰" (one 2-byte
    character, U+6770) share a hash. ``hash()`` of a str is salted per process, which is why the table is
    built at load, never saved.
    """

    def __init__(self, pieces: Sequence[str]) -> None:
        encoded = [p.encode() for p in pieces]
        self._utf8 = b"".join(encoded)
        self._bytes = np.frombuffer(self._utf8, np.uint8)
        wide = len(self._utf8) >= 2**31  # 250k pieces are ~2.6 MB: int32 offsets
        self._offsets = np.zeros(len(pieces) + 1, np.int64 if wide else np.int32)
        np.cumsum([len(b) for b in encoded], out=self._offsets[1:])
        del encoded
        chars = np.fromiter(map(len, pieces), np.int32, len(pieces))
        self._chars = chars.astype(np.uint8) if chars.max(initial=0) < 256 else chars  # XLM-R's: <= 16
        hashes = np.fromiter(map(hash, pieces), np.int64, len(pieces))
        order = np.argsort(hashes, kind="stable")
        # a sentinel past the end: a search never falls off the array
        self._hashes = np.append(hashes[order], np.iinfo(np.int64).max)
        self._ids = np.append(order.astype(np.int32), -1)
        self._max_len = int(chars.max(initial=0))

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def piece(self, i: int) -> str:
        return self._utf8[self._offsets[i] : self._offsets[i + 1]].decode()

    def duplicated(self) -> bool:
        """True when a piece occurs twice (only pieces of one hash can be the same)."""
        same = np.flatnonzero(self._hashes[1:] == self._hashes[:-1]).tolist()
        return any(self.piece(int(self._ids[a])) == self.piece(int(self._ids[a + 1])) for a in same)

    def get(self, text: str) -> int | None:
        """The id of the piece ``text``, or None."""
        found = self.find([text])
        return found[0][1] if found else None

    def find(self, texts: Sequence[str]) -> list[tuple[int, int]]:
        """``[(index into texts, id)]`` of the texts that are pieces, in the order of ``texts``."""
        wanted = np.fromiter(map(hash, texts), np.int64, len(texts))
        at = np.searchsorted(self._hashes, wanted)
        hits = np.flatnonzero((self._hashes[at] == wanted) & (at < len(self)))
        if not len(hits):
            return []
        at = at[hits]
        ids = self._ids[at]
        if len(hits) <= _FEW:  # a query's words: one by one costs less than the vectorised check
            found = [(k, self._search(texts[k], a)) for k, a in zip(hits.tolist(), at.tolist(), strict=True)]
            return [(k, i) for k, i in found if i >= 0]
        chosen = [texts[k] for k in hits.tolist()]
        # the hits whose piece has their length in characters: all compared in one go (their joined
        # UTF-8); those of another length met a piece of another string kind, and look further
        same = self._chars[ids] == np.fromiter(map(len, chosen), np.int32, len(chosen))
        if not same.all():
            chosen = list(compress(chosen, same.tolist()))
        if self._joined(ids[same]) != "".join(chosen).encode():
            same[:] = False  # two strings of one hash and length: compare them one by one below
        found = np.where(same, ids, -1)
        for j in np.flatnonzero(~same).tolist():
            found[j] = self._search(texts[hits[j]], int(at[j]))
        keep = found >= 0
        return list(zip(hits[keep].tolist(), found[keep].tolist(), strict=True))

    def _joined(self, ids: np.ndarray) -> bytes:
        """The UTF-8 of the pieces ``ids``, one after the other."""
        starts, ends = self._offsets[ids].astype(np.int64), self._offsets[ids + 1].astype(np.int64)
        sizes = ends - starts
        before = np.cumsum(sizes) - sizes  # where each piece begins in the result
        return self._bytes[np.repeat(starts - before, sizes) + np.arange(sizes.sum())].tobytes()

    def _search(self, text: str, at: int) -> int:
        """The id of the piece ``text`` among the pieces of its hash from sorted position ``at``, or -1."""
        raw, hashes, ids, offsets = text.encode(), self._hashes, self._ids, self._offsets
        h = hashes[at]
        while True:
            i = int(ids[at])
            if self._utf8[offsets[i] : offsets[i + 1]] == raw:
                return i
            at += 1
            if hashes[at] != h:
                return -1
