"""The LanceDB table of records: the module that opens, writes and compacts it.

The table's life is kept in three modules so a LanceDB upgrade is checked in one place: this one (open,
reads, queries), :mod:`memoryd.index.store_writes` (upsert, delete, refresh, compaction) and
:mod:`memoryd.index.table` (schema, connection, SQL filters); the full-text indexes' definition and the
token read-back belong to the keyword half (:mod:`memoryd.index.keyword`), the only other module that
calls LanceDB; the in-memory columns live beside it (:mod:`memoryd.index.columns`).

One table, ``records``: filter columns (kind, project, task, status, created_at), two keyword columns
with BM25 full-text indexes (``text_main`` weighted above ``text_aux``), a vector column for the
meaning half, and the hashes that make syncing incremental. Everything here is derived from the board
and may be deleted at any time; :class:`IndexStore` then starts empty and the sync rebuilds it.

The vectors and every column but the two keyword texts are also held in memory
(:mod:`memoryd.index.columns`), loaded once at open and updated by every write: nearest neighbours,
row look-ups, hashes and counts are served from there; LanceDB serves the BM25 half and is the copy
on disk.

Writes are meant to come in batches from one writer (each LanceDB write adds a fragment and a
version); :meth:`IndexStore.optimize` compacts, refreshes the full-text indexes and drops old
versions, so deleted text also leaves the bytes on disk.
"""

from __future__ import annotations

import os

os.environ.setdefault("LANCEDB_LOG", "error")  # before lancedb loads: its Rust warnings are plain text

import asyncio
import contextlib
import shutil
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from lancedb.background_loop import LOOP
from lancedb.index import FTS, Bitmap
from lancedb.query import MultiMatchQuery
from lancedb.table import AsyncTable

from memoryd.index import keyword, owned
from memoryd.index.columns import ANY_ROW, Columns, Filter
from memoryd.index.columns import COLUMNS as MEM_COLUMNS
from memoryd.index.keyword_tail import KeywordTail
from memoryd.index.lock import DEFAULT_WAIT_S, OWN_FILES, IndexLock
from memoryd.index.store_writes import StoreWrites
from memoryd.index.table import (
    FILTER_COLUMNS,
    SCHEMA_VERSION,
    TABLE,
    TEXT_BOOSTS,
    TEXT_COLUMNS,
    _connect,
    _quote,
    _schema,
    where_sql,
)
from memoryd.index.term_stats import TermStats
from memoryd.index.typos import Typos
from memoryd.logs import get_logger

log = get_logger("memoryd.index.store")

#: Saved keyword term statistics (:class:`memoryd.index.term_stats.TermStats`), beside the table.
STATS_FILE = "termstats.json"
#: Saved own-evidence signatures (:class:`memoryd.index.owned.Signatures`), beside the table.
SIGNATURES_FILE = "signatures.json"


@dataclass(frozen=True)
class StoredHash:
    hash: str
    embed_hash: str
    model: str


class IndexStore(StoreWrites):
    """The records table at ``path`` (a folder), with vectors of ``dim`` floats.

    Thread-safety: reads may run concurrently from several threads, also while a write runs (they see
    the in-memory state before or after it, never a mix); writes must come from one writer at a time
    (an internal lock serialises them anyway). The in-memory copy holds this process's view: another
    process writing the same folder is not seen.

    A process that writes opens the store with :meth:`open_writer`, under the index's writer lock
    (:mod:`memoryd.index.lock`: one writer per index, one board per index). The constructor alone takes
    no lock; it is for reading a folder nobody else writes (tests, benchmarks).
    """

    def __init__(self, path: Path, dim: int = 384) -> None:
        self.path = Path(path)
        self.dim = dim
        self.writer: IndexLock | None = None  # set by open_writer
        self._owns_writer = False
        self._write_lock = threading.Lock()
        # held by a fold of the keyword tail (:meth:`refresh`): appends go on beside it, merges, deletes
        # and compactions wait (always taken before ``_write_lock``)
        self._fold_lock = threading.Lock()
        self.path.mkdir(parents=True, exist_ok=True)
        os.chmod(self.path, 0o700)
        self._session, self._db = _connect(self.path)  # the session's size_bytes: what its caches hold now
        self._stats_path = self.path / STATS_FILE
        self._signatures_path = self.path / SIGNATURES_FILE
        self._table = self._open_or_create()
        self._fts_ready = self._has_fts()
        self.stats = TermStats()
        #: the indexed terms a misspelled query term may stand for, following ``stats.df``
        self.typos = Typos()
        self.mem = Columns(dim)
        #: rows written since the text indexes were last refreshed (:mod:`memoryd.index.keyword_tail`)
        self.tail = KeywordTail(TEXT_COLUMNS, TEXT_BOOSTS)
        self._mark: str | None = None  # the group mark as the text index tokenises it
        self._load()
        #: each record's own and group's terms, as its write or a search left them (:mod:`memoryd.index.owned`)
        self.signatures = owned.Signatures.load(self._signatures_path, self._content_hashes())
        # rows written after the last refresh by an earlier process (it died first): not in this tail, so
        # keyword queries scan them in LanceDB until the writer refreshes (open_writer does at once)
        self._untailed = self._fts_ready and keyword.unindexed(self._table) > 0

    # -- lifecycle -------------------------------------------------------------------------------
    @classmethod
    def open_writer(cls, writer: IndexLock, dim: int = 384, *, wait_s: float = DEFAULT_WAIT_S) -> IndexStore:
        """The store of ``writer.index``, opened for writing under its writer lock.

        Takes the lock unless this process holds it already (``memoryd serve`` takes it before binding its
        socket, so a second writer is refused at start-up); :meth:`close` releases only a lock taken here.
        Raises :class:`~memoryd.index.lock.IndexInUse` or :class:`~memoryd.index.lock.IndexOfAnotherBoard`
        (both :class:`~memoryd.errors.StartupError`).
        """
        took = not writer.held
        writer.acquire(wait_s)
        try:
            store = cls(writer.index, dim)
        except BaseException:
            if took:
                writer.release()
            raise
        store.writer, store._owns_writer = writer, took
        if store._untailed:
            store._refresh()
        if store._fts_ready and not store._has_kind_index():  # an index written before it had one
            try:
                with store._write_lock:
                    store._build_kind_index()
            except Exception as exc:  # searches only filter slower without it: the daemon still starts
                log.warning(
                    "kind_index_not_built", path=str(store.path), error=f"{type(exc).__name__}: {exc}"
                )
        return store

    def close(self) -> None:
        """Save the own-evidence signatures (the writer's store), then release the writer lock if
        :meth:`open_writer` took it (idempotent). Writes already done are on disk."""
        if self._owns_writer and self.writer is not None:
            self._save_signatures()
            self.writer.release()
        self._owns_writer = False

    def _content_hashes(self) -> dict[str, str]:
        return {i: h for i, h, _, _ in self.mem.hashes(None)}

    def _save_signatures(self) -> None:
        try:
            self.signatures.save(self._signatures_path, self._content_hashes())
        except OSError as exc:  # only the next start's first searches get slower
            log.warning("signatures_not_saved", path=str(self._signatures_path), error=str(exc))

    def _reopen(self) -> None:
        """The table at its latest version through a new session, whose caches hold nothing yet; the old
        session goes with the last search still reading through it (caller holds ``_write_lock``)."""
        session, db = _connect(self.path)
        table = db.open_table(TABLE)
        self._session, self._db, self._table = session, db, table

    def _open_or_create(self):
        if TABLE in self._db.list_tables().tables:
            table = self._db.open_table(TABLE)
            meta = table.schema.metadata or {}
            if (
                meta.get(b"memoryd.schema") == SCHEMA_VERSION.encode()
                and meta.get(b"memoryd.dim") == str(self.dim).encode()
            ):
                return table
            log.warning("index_schema_changed", path=str(self.path), action="rebuild")
            self._db.drop_table(TABLE)
        self._stats_path.unlink(missing_ok=True)
        return self._db.create_table(TABLE, schema=_schema(self.dim))

    def _load(self) -> None:
        """Read the table once: the in-memory columns and vectors; the keyword term statistics from
        their saved copy when it matches the table, else counted from the texts (a second scan)."""
        rows = self._table.count_rows()
        self.mem.reserve(rows)
        names = list(MEM_COLUMNS)
        for batch in self._table.search().select([*names, "vector"]).limit(None).to_batches():
            if not batch.num_rows:
                continue
            values = [batch.column(c).to_pylist() for c in names]
            data = [dict(zip(names, v, strict=True)) for v in zip(*values, strict=True)]
            flat = batch.column("vector").flatten().to_numpy(zero_copy_only=False)
            vecs = np.asarray(flat, dtype=np.float32).reshape(batch.num_rows, self.dim)
            self.mem.publish(self.mem.prepare_upsert(data, vecs))
        saved = TermStats.load(self._stats_path, self._table.version, rows)
        if saved is not None:
            self.stats = saved
            return
        for batch in self._table.search().select(list(TEXT_COLUMNS)).limit(None).to_batches():
            for main, aux in zip(
                batch.column("text_main").to_pylist(), batch.column("text_aux").to_pylist(), strict=True
            ):
                self.stats.add(main, aux)

    def _has_fts(self) -> bool:
        names = {cfg.columns[0] for cfg in self._table.list_indices() if cfg.index_type == "FTS"}
        return all(col in names for col in TEXT_COLUMNS)

    def _has_kind_index(self) -> bool:
        return any(cfg.columns == ["kind"] for cfg in self._table.list_indices())

    def _build_kind_index(self) -> None:
        # every search filters on the kind before ranking: with a bitmap, LanceDB's BM25 half reads the
        # rows of that kind from it instead of scanning the column (4.7 -> 3.3 ms a query at 18,000 rows)
        self._table.create_index("kind", config=Bitmap(), replace=True)

    def _build_fts(self) -> None:
        if not self._fts_ready:  # signatures noted before held terms as written, not as the index stems them
            self.signatures = owned.Signatures()
        for col in TEXT_COLUMNS:
            # our own term strings are already tokenised: split on spaces, stem English, no stop words
            cfg = FTS(base_tokenizer="whitespace", stem=True, remove_stop_words=False, with_position=False)
            self._table.create_index(col, config=cfg, replace=True)
        self._build_kind_index()
        self._fts_ready = True
        self.tail.clear()  # built over every row
        self._untailed = False

    @staticmethod
    def wipe(path: Path) -> None:
        """Delete the index folder (it is a cache of the board), except its writer lock and owner record
        when it has them (a lock file is never deleted: :mod:`memoryd.serve.lock`)."""
        if not path.is_dir():
            return
        for child in path.iterdir():
            if child.name in OWN_FILES:
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            path.rmdir()  # gone altogether when nothing of its own was in it

    # -- reads -----------------------------------------------------------------------------------
    def count(self) -> int:
        """Number of records (from memory)."""
        return self.mem.snap.live

    def counts_by_kind(self) -> dict[str, int]:
        return self.mem.counts("kind")

    def projects(self) -> set[str]:
        """Distinct project names of the stored records (cached until the next write)."""
        return {p for p in self.mem.distinct("project") if p}

    def stored_hashes(self, kind: str | None = None) -> dict[str, StoredHash]:
        """id -> hashes and model of every stored record (of ``kind`` when given)."""
        return {i: StoredHash(h, e, m) for i, h, e, m in self.mem.hashes(kind)}

    def stored_hashes_for(self, ids: Sequence[str]) -> dict[str, StoredHash]:
        """Hashes and model of the given ids (absent ids are left out)."""
        got = self.rows(ids, ("id", "hash", "embed_hash", "model"))
        return {i: StoredHash(r["hash"], r["embed_hash"], r["model"]) for i, r in got.items()}

    def stems(self, words: Sequence[str]) -> list[str] | None:
        """Each of our terms ``words`` as the main text index tokenises it (stemmed, space-joined), or None
        before the text indexes exist. One LanceDB call (~0.6 ms)."""
        if not self._fts_ready or not words:
            return None if not self._fts_ready else []
        return [" ".join(t) for t in keyword.tokens(self._table, list(words), TEXT_COLUMNS[0])]

    def rows(self, ids: Sequence[str], columns: Sequence[str] = FILTER_COLUMNS) -> dict[str, dict]:
        """The stored columns of ``ids`` (missing ids are absent from the answer): ``{id: {column:
        value}}``; ``vector`` comes as a list of floats. Served from memory, except the keyword texts."""
        if not ids:
            return {}
        if all(c in MEM_COLUMNS or c == "vector" for c in columns):
            return self.mem.rows(ids, columns)
        out: dict[str, dict] = {}
        ids = list(ids)
        inner = self._table._table  # the async table: the sync query's wrapper read the schema thrice
        for start in range(0, len(ids), 500):
            where = "id IN (" + ", ".join(_quote(i) for i in ids[start : start + 500]) + ")"
            query = inner.query().where(where).select(list(columns))
            got = asyncio.run_coroutine_threadsafe(query.to_arrow(), LOOP.loop).result().to_pylist()
            out.update((r["id"], r) for r in got)
        return out

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors by id (only rows that have one): float32 ``(dim,)`` copies."""
        return self.mem.vectors(ids)

    def keyword(self, query_terms: str, where: Filter, limit: int) -> list[tuple[str, float]]:
        """BM25 over the text columns: ``[(id, score)]`` best first. ``query_terms`` are our own terms
        (never user syntax); an empty string or an index with no rows gives ``[]``."""
        return self.keyword_start(query_terms, where, limit).result()

    def keyword_start(self, query_terms: str, where: Filter, limit: int) -> Future:
        """Start :meth:`keyword` and return a :class:`concurrent.futures.Future` of its answer at once.

        The query runs on LanceDB's own event loop and threads in one round trip (the sync API makes
        six, each a thread hand-off), so the caller can embed the query meanwhile. ``where`` is applied
        before ranking. ``.result()`` re-raises LanceDB errors; a column the table does not have raises
        ValueError at once."""
        sql = where_sql(where)
        if not query_terms.strip() or self.count() == 0:
            done: Future = Future()
            done.set_result([])
            return done
        if not self._fts_ready:
            with self._write_lock:
                if not self._fts_ready:
                    self._build_fts()
        q = MultiMatchQuery(query_terms, list(TEXT_COLUMNS), boosts=list(TEXT_BOOSTS))
        inner = getattr(self._table, "_table", None)
        if not isinstance(inner, AsyncTable) or self._untailed:
            # not the lancedb 0.40 layout, or rows no tail holds: LanceDB scans the rows written since
            # the last refresh itself (slower, same answer)
            done = Future()
            builder = self._table.search(q, query_type="fts").select(["id", "_score"]).limit(limit)
            if sql:
                builder = builder.where(sql, prefilter=True)
            done.set_result([(r["id"], float(r["_score"])) for r in builder.to_list()])
            return done

        def keep(ids: list[str]) -> set[str]:
            got = self.mem.rows(ids, where.columns())
            return {i for i, row in got.items() if where.passes(row)}

        docs = max(self.stats.docs, 1)
        avg = [n / docs for n in self.stats.lengths]
        coro = keyword.search(
            inner, self.tail, q, query_terms, sql, limit, self.stats.idf, keep, TEXT_COLUMNS[0], avg, docs
        )
        return asyncio.run_coroutine_threadsafe(coro, LOOP.loop)

    def nearest(self, vector: np.ndarray, where: Filter, limit: int) -> list[tuple[str, float]]:
        """Cosine similarity search over rows that have a vector and pass ``where``: ``[(id, cosine)]``
        best first (:meth:`nearest_by` without groups)."""
        return self.nearest_by(vector, limit, where).get(None, [])

    def nearest_by(
        self, vector: np.ndarray, limit: int, where: Filter = ANY_ROW, per: str | None = None
    ) -> dict[str | None, list[tuple[str, float]]]:
        """Nearest neighbours from memory: ``{group: [(id, cosine)]}``, each list best first (ties by
        insertion order), over rows that have a vector and pass ``where``. With ``per`` (a categorical
        column such as ``lang``) one list per value of that column, else one list under the key None.
        Raises ValueError for a column the index does not have."""
        snap = self.mem.snap
        mask = self.mem.mask(snap, where)
        return self.mem.nearest(vector, limit, mask, snap, per)

    def newest(self, where: Filter, limit: int, per: str | None = None) -> list[str]:
        """Ids of the newest rows passing ``where`` (vector or not), from memory: see
        :meth:`memoryd.index.columns.Columns.newest`. Raises ValueError for a column the index does not have."""
        return self.mem.newest(where, limit, per)

    def version(self) -> int:
        return self._table.version
