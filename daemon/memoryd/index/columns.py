"""The index's vectors and filter columns held in memory, beside the LanceDB table.

Nearest neighbours become one float32 matrix-vector product with boolean masks for the filters (about
2 ms of one core at 10,000 records of 384 floats, 20 ms at 100,000: memory bandwidth) instead of a
LanceDB flat scan per query (50-280 ms, and ~130 MB of RSS per burst of queries), and candidate
rows come from here instead of a full-table ``id IN (...)`` look-up. LanceDB stays the store on disk
and serves the BM25 half; :class:`memoryd.index.store.IndexStore` keeps this copy equal to it.

Concurrency (one writer, many readers, no lock on the read side): the state readers see is one
immutable :class:`Snapshot`, published by a single attribute assignment. Every per-row buffer is
append-only: an update appends the new row and clears the old row's ``alive`` bit in a *copy* of the
mask, a delete only copies the mask. Readers look at rows ``< snapshot.n`` only, so a writer filling
rows past ``n`` of a shared buffer never changes what a reader sees. When a buffer is full, or dead rows
pile up, the live rows are copied into fresh buffers (compaction) and the next snapshot points there.

Memory: 4 bytes x dim per vector (384 floats = 1.5 KiB; 100,000 records = 154 MB), int32 codes for
the categorical columns, and Python strings for id, date, title, line and the two hashes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

#: Columns stored as int32 codes into a per-column vocabulary (filters compare codes).
CATEGORICAL = ("kind", "project", "task", "status", "lang", "model")
#: Columns stored as Python strings (one object per row).
PLAIN = ("id", "created_at", "title", "line", "hash", "embed_hash")
#: Every column this module can answer (plus ``vector``).
COLUMNS = (*PLAIN, *CATEGORICAL)
_MIN_CAPACITY = 1024


#: Rows from which a scan is split in two halves, one on a helper thread (memory bandwidth per core is
#: the limit: 100,000 x 384 floats take ~20 ms on one core, ~11 ms on two; 10,000 0.92 -> 0.46 ms,
#: 20,000 2.7 -> 1.5 ms; the hand-off costs more than it saves only below a few thousand).
SPLIT_ROWS = 8_192
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def dot_rows(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix @ vector`` as float32 ``(rows,)``, with numpy's own einsum loop (one thread; OpenBLAS's
    gemv spins threads that stall on a busy machine), split over two threads for large matrices."""
    global _pool
    rows = len(matrix)
    if rows < SPLIT_ROWS or (os.cpu_count() or 1) < 2:
        return np.einsum("ij,j->i", matrix, vector)
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memoryd-scan")
    out = np.empty(rows, dtype=np.float32)
    half = rows // 2
    first = _pool.submit(np.einsum, "ij,j->i", matrix[:half], vector, out=out[:half])
    np.einsum("ij,j->i", matrix[half:], vector, out=out[half:])  # einsum releases the GIL
    first.result()
    return out


@dataclass(frozen=True)
class Filter:
    """Which rows a search may return, as data (never SQL): every term must hold.

    ``terms``: ``(column, values, keep)`` triples; ``keep`` True means the row's value is one of
    ``values``, False means it is none of them. ``Filter()`` passes every row. Build one with
    :meth:`where` and :meth:`excluding`; the store renders it as SQL for LanceDB, the in-memory columns
    apply it as masks (:meth:`Columns.mask`), and :meth:`passes` checks one row.
    """

    terms: tuple[tuple[str, frozenset[str], bool], ...] = ()

    def where(self, **columns: str | Iterable[str] | None) -> Filter:
        """This filter, and each named column equal to its value (or one of its values); None adds
        nothing, so optional arguments pass straight through: ``Filter().where(project=None)``."""
        return self._add(columns, True)

    def excluding(self, **columns: str | Iterable[str] | None) -> Filter:
        """This filter, and each named column equal to none of its values."""
        return self._add(columns, False)

    def _add(self, columns: Mapping[str, str | Iterable[str] | None], keep: bool) -> Filter:
        terms = list(self.terms)
        for column, value in columns.items():
            if value is not None:
                values = frozenset([value] if isinstance(value, str) else value)
                terms.append((column, values, keep))
        return Filter(tuple(terms))

    def columns(self) -> list[str]:
        """The columns the terms name, each once."""
        return list(dict.fromkeys(c for c, _, _ in self.terms))

    def passes(self, row: Mapping[str, str]) -> bool:
        """True when ``row`` (column -> value, holding every column of :meth:`columns`) passes."""
        return all((row[c] in values) == keep for c, values, keep in self.terms)

    def __bool__(self) -> bool:
        return bool(self.terms)


#: The filter every row passes.
ANY_ROW = Filter()


class Vocab:
    """Append-only value <-> code map. Codes never change meaning, so readers need no lock."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}
        self.values: list[str] = []

    def encode(self, value: str) -> int:
        code = self.codes.get(value)
        if code is None:
            code = len(self.values)
            self.values.append(value)  # before the dict entry: a reader that finds the code finds the value
            self.codes[value] = code
        return code

    def code(self, value: str) -> int:
        """The value's code, or -1 when no row ever had it."""
        return self.codes.get(value, -1)


class Buffers:
    """Per-row storage of capacity ``cap``; rows below a published snapshot's ``n`` never change."""

    def __init__(self, dim: int, cap: int, vocab: dict[str, Vocab]) -> None:
        self.cap = cap
        self.vec = np.zeros((cap, dim), dtype=np.float32)
        self.codes = {c: np.zeros(cap, dtype=np.int32) for c in CATEGORICAL}
        self.plain: dict[str, list[str]] = {c: [] for c in PLAIN}
        self.vocab = vocab


@dataclass(frozen=True)
class Snapshot:
    """What readers see: rows ``< n`` of ``buf``; ``alive`` marks the current version of each id;
    ``usable`` = alive and has a vector; ``pos`` maps a live id to its row."""

    buf: Buffers
    n: int
    alive: np.ndarray
    usable: np.ndarray
    pos: dict[str, int]
    cache: dict = field(default_factory=dict, compare=False)  # derived answers of this snapshot

    @property
    def live(self) -> int:
        return len(self.pos)


class Columns:
    """In-memory copy of the records table (see the module docstring). Writes must be serialised by the
    caller: :meth:`prepare_upsert` / :meth:`prepare_delete` build a snapshot, :meth:`publish` makes it
    visible (the caller publishes only after the table write succeeded)."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        vocab = {c: Vocab() for c in CATEGORICAL}
        vocab["model"].encode("")  # code 0 = no vector
        self.snap = self._empty(Buffers(dim, _MIN_CAPACITY, vocab))

    @staticmethod
    def _empty(buf: Buffers) -> Snapshot:
        return Snapshot(buf, 0, np.zeros(0, bool), np.zeros(0, bool), {})

    # -- writes (one writer) ---------------------------------------------------------------------
    def reserve(self, rows: int) -> None:
        """Make room for ``rows`` more rows at once (before a bulk load: no repeated growth)."""
        snap = self.snap
        if snap.n + rows > snap.buf.cap:
            self.publish(self._compacted(snap, extra=rows))

    def prepare_upsert(self, rows: Sequence[Mapping], vectors: np.ndarray | None) -> Snapshot:
        """A snapshot with ``rows`` (dicts holding every name in :data:`COLUMNS`) inserted or replacing
        the rows of the same id; ``vectors`` float32 ``(len(rows), dim)`` or None (zeros)."""
        snap = self.snap
        k = len(rows)
        if snap.n + k > snap.buf.cap:
            snap = self._compacted(snap, extra=k)
        buf, n = snap.buf, snap.n
        for lst in buf.plain.values():
            del lst[n:]  # rows a failed earlier write left past n
        end = n + k
        if vectors is not None:
            buf.vec[n:end] = vectors
        else:
            buf.vec[n:end] = 0.0
        for c in CATEGORICAL:
            enc = buf.vocab[c].encode
            buf.codes[c][n:end] = [enc(str(r[c])) for r in rows]
        for c in PLAIN:
            buf.plain[c].extend(str(r[c]) for r in rows)
        alive = np.concatenate([snap.alive, np.ones(k, bool)])
        pos = dict(snap.pos)
        for offset, r in enumerate(rows):
            old = pos.get(r["id"])
            if old is not None:  # an earlier version, or the same id earlier in this batch
                alive[old] = False
            pos[r["id"]] = n + offset
        usable = alive & (buf.codes["model"][:end] != 0)
        return Snapshot(buf, end, alive, usable, pos)

    def prepare_delete(self, ids: Iterable[str]) -> Snapshot:
        snap = self.snap
        rows = [snap.pos[i] for i in ids if i in snap.pos]
        if not rows:
            return snap
        alive, usable, pos = snap.alive.copy(), snap.usable.copy(), dict(snap.pos)
        alive[rows] = False
        usable[rows] = False
        for i in ids:
            pos.pop(i, None)
        return Snapshot(snap.buf, snap.n, alive, usable, pos)

    def publish(self, snap: Snapshot) -> None:
        self.snap = snap  # one assignment: readers see the old state or the new one, never a mix

    def compact(self, min_dead_share: float = 0.1) -> None:
        """Drop dead rows when they are at least ``min_dead_share`` of the rows (call under the write lock)."""
        snap = self.snap
        if snap.n and snap.n - snap.live >= max(1, min_dead_share * snap.n):
            self.publish(self._compacted(snap, extra=0))

    def _compacted(self, snap: Snapshot, extra: int) -> Snapshot:
        keep = np.flatnonzero(snap.alive)
        live = len(keep)
        cap = max(_MIN_CAPACITY, int((live + extra) * 1.25) + 1)
        old, buf = snap.buf, Buffers(self.dim, cap, snap.buf.vocab)
        np.take(old.vec, keep, axis=0, out=buf.vec[:live])  # no temporary copy of the vectors
        for c in CATEGORICAL:
            buf.codes[c][:live] = old.codes[c][keep]
        for c in PLAIN:
            src = old.plain[c]
            buf.plain[c].extend(src[i] for i in keep)
        pos = {i: r for r, i in enumerate(buf.plain["id"])}
        usable = buf.codes["model"][:live] != 0
        return Snapshot(buf, live, np.ones(live, bool), usable, pos)

    # -- reads (any thread) ----------------------------------------------------------------------
    def rows(self, ids: Iterable[str], columns: Sequence[str]) -> dict[str, dict]:
        snap = self.snap
        found = [(i, snap.pos[i]) for i in ids if i in snap.pos]
        if not found or not columns:
            return {i: {} for i, _ in found}
        rows = [r for _, r in found]
        buf = snap.buf
        values = []
        for c in columns:  # column by column: one numpy gather per categorical column
            if c in buf.codes:
                vocab = buf.vocab[c].values
                values.append([vocab[k] for k in buf.codes[c][rows].tolist()])
            elif c == "vector":
                values.append(buf.vec[rows].tolist())
            else:
                plain = buf.plain[c]
                values.append([plain[r] for r in rows])
        return {
            i: dict(zip(columns, v, strict=True))
            for (i, _), v in zip(found, zip(*values, strict=True), strict=True)
        }

    def vectors(self, ids: Iterable[str]) -> dict[str, np.ndarray]:
        snap = self.snap
        got = [(i, snap.pos[i]) for i in ids if i in snap.pos]
        return {i: snap.buf.vec[r].copy() for i, r in got if snap.usable[r]}

    def mask(self, snap: Snapshot, where: Filter, *, vectorless: bool = False) -> np.ndarray:
        """Rows (usable ones; every live one with ``vectorless``) that pass ``where``. Raises ValueError
        for a column this module does not hold."""
        m = (snap.alive if vectorless else snap.usable).copy()
        for column, values, keep in where.terms:
            if column in snap.buf.codes:
                codes = [snap.buf.vocab[column].code(v) for v in values]
                hit = np.isin(snap.buf.codes[column][: snap.n], codes)
            elif column == "id":
                hit = np.zeros(snap.n, bool)
                hit[[snap.pos[v] for v in values if v in snap.pos]] = True
            elif column in snap.buf.plain:
                hit = np.fromiter((v in values for v in snap.buf.plain[column][: snap.n]), bool, snap.n)
            else:
                raise ValueError(f"no column {column!r} to filter on")
            m &= hit if keep else ~hit
        return m

    def nearest(
        self, vector: np.ndarray, limit: int, mask: np.ndarray, snap: Snapshot, per: str | None = None
    ) -> dict[str | None, list[tuple[str, float]]]:
        """Top ``limit`` rows of ``mask`` by dot product with ``vector`` (cosine for unit vectors), best
        first, ties by row; with ``per``, one list per value of that categorical column."""
        idx = np.flatnonzero(mask)
        if not len(idx):
            return {}
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        if len(idx) * 3 >= snap.n:  # a gather copies its rows: dearer than a full scan unless few
            scores = dot_rows(snap.buf.vec[: snap.n], q)[idx]
        else:
            scores = dot_rows(snap.buf.vec[idx], q)
        if per is None:
            return {None: self._top(snap, idx, scores, limit)}
        codes = snap.buf.codes[per][idx]
        values = snap.buf.vocab[per].values
        out = {}
        present = range(len(values)) if len(values) <= 16 else np.unique(codes).tolist()
        for code in present:  # a handful of values (script groups): cheaper than np.unique
            sel = codes == code
            if sel.any():
                out[values[code]] = self._top(snap, idx[sel], scores[sel], limit)
        return out

    @staticmethod
    def _top(snap: Snapshot, idx: np.ndarray, scores: np.ndarray, limit: int) -> list[tuple[str, float]]:
        if len(idx) > limit:
            part = np.argpartition(-scores, limit - 1)[:limit]
            idx, scores = idx[part], scores[part]
        order = np.lexsort((idx, -scores))
        ids = snap.buf.plain["id"]
        return [(ids[idx[o]], float(scores[o])) for o in order]

    def newest(self, where: Filter, limit: int, per: str | None = None) -> list[str]:
        """Ids of up to ``limit`` live rows that pass ``where``, newest ``created_at`` first (ties: the
        greater id first). With ``per`` (a categorical column such as ``task``), only the newest row of
        each of its values; rows whose value is empty each stand alone."""
        snap = self.snap
        rows = np.flatnonzero(self.mask(snap, where, vectorless=True)).tolist()
        dates, ids = snap.buf.plain["created_at"], snap.buf.plain["id"]
        rows.sort(key=lambda r: (dates[r], ids[r]), reverse=True)
        codes = snap.buf.codes[per] if per else None
        empty = snap.buf.vocab[per].code("") if per else -1
        seen: set[int] = set()
        out: list[str] = []
        for r in rows:
            if codes is not None:
                code = int(codes[r])
                if code in seen:
                    continue
                if code != empty:
                    seen.add(code)
            out.append(ids[r])
            if len(out) >= limit:
                break
        return out

    def distinct(self, column: str) -> set[str]:
        """Values of a categorical column among live rows (cached per snapshot)."""
        snap = self.snap
        key = ("distinct", column)
        if key not in snap.cache:
            codes = np.unique(snap.buf.codes[column][: snap.n][snap.alive])
            values = snap.buf.vocab[column].values
            snap.cache[key] = {values[c] for c in codes}
        return snap.cache[key]

    def counts(self, column: str) -> dict[str, int]:
        snap = self.snap
        codes, n = np.unique(snap.buf.codes[column][: snap.n][snap.alive], return_counts=True)
        values = snap.buf.vocab[column].values
        return {values[c]: int(k) for c, k in sorted(zip(codes, n, strict=True), key=lambda x: values[x[0]])}

    def hashes(self, kind: str | None = None) -> list[tuple[str, str, str, str]]:
        """``[(id, hash, embed_hash, model)]`` of live rows (of ``kind`` when given)."""
        snap = self.snap
        m = snap.alive.copy()
        if kind is not None:
            m &= snap.buf.codes["kind"][: snap.n] == snap.buf.vocab["kind"].code(kind)
        rows = np.flatnonzero(m)
        buf = snap.buf
        ids, h, e = buf.plain["id"], buf.plain["hash"], buf.plain["embed_hash"]
        models, mc = buf.vocab["model"].values, buf.codes["model"]
        return [(ids[r], h[r], e[r], models[mc[r]]) for r in rows.tolist()]
