"""The LanceDB table of records: the module that opens, writes and compacts it.

It is ~500 lines on purpose: keeping the table's life (open, schema, writes, compaction, queries) in one
module is what lets a LanceDB upgrade be checked in one place; the full-text indexes' definition and the
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
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.background_loop import LOOP
from lancedb.index import FTS
from lancedb.query import MultiMatchQuery
from lancedb.table import AsyncTable

from memoryd.index import keyword, owned
from memoryd.index.columns import ANY_ROW, Columns, Filter
from memoryd.index.columns import COLUMNS as MEM_COLUMNS
from memoryd.index.keyword_tail import KeywordTail
from memoryd.index.lock import DEFAULT_WAIT_S, OWN_FILES, IndexLock
from memoryd.index.records import Record
from memoryd.index.term_stats import TermStats
from memoryd.index.terms import GROUP_MARK
from memoryd.index.typos import Typos
from memoryd.logs import get_logger

log = get_logger("memoryd.index.store")

TABLE = "records"
SCHEMA_VERSION = "2"
FILTER_COLUMNS = ("id", "kind", "project", "task", "status", "created_at", "title", "line", "lang")
TEXT_COLUMNS = ("text_main", "text_aux")
#: Saved keyword term statistics (:class:`memoryd.index.term_stats.TermStats`), beside the table.
STATS_FILE = "termstats.json"
#: Saved own-evidence signatures (:class:`memoryd.index.owned.Signatures`), beside the table.
SIGNATURES_FILE = "signatures.json"
#: BM25 weight of each text column: what the person said and the titles count more than screen text.
TEXT_BOOSTS = (2.0, 1.0)
#: Bounds of LanceDB's caches (bytes). Its defaults (1 GiB of metadata, 6 GiB of index) keep what every
#: version it read needs: a manifest lists every fragment, so single-row writes cache a growing manifest
#: per write (832 MB after 2,000 of them); each index refresh makes new text indexes to cache. A search
#: and a write need the latest version's (a few MB at 10,000 rows); measured no slower. Metadata 8 MiB:
#: a store grown to 18,000 rows by writes of 50 and 9 refreshes held 37.6 MiB in both caches with 32,
#: 21.9 with 8 (RSS 23 MB lower); a search on a freshly opened 18,000-row store needs 4.6 MiB of both
#: (keyword p50 1.90 ms with 32, 8 or 4 MiB, interleaved).
METADATA_CACHE_BYTES = 8 << 20
INDEX_CACHE_BYTES = 128 << 20
#: Past the bounds, what a refresh leaves cached is dropped with it: each refresh of the text indexes
#: makes new ones and the caches kept every older one (stale: no search asks for them again) up to
#: INDEX_CACHE_BYTES, 24 MB after 20 refreshes of a store grown to 10,000 rows by writes of 50, 1.3 MB
#: with the table opened again through a new session after each (:meth:`IndexStore._reopen`); a search
#: after a refresh loads the new indexes either way (first query 6-21 ms both ways on a loaded machine).


#: Text columns are stored as written: no FSST or general compression. Forgetting is checked by reading
#: the bytes of the index folder (tests/e2e/test_forgetting.py); compressed text would hide
#: words from that check without hiding them from anyone who decodes the file.
_PLAIN = {"lance-encoding:compression": "none"}


def _schema(dim: int) -> pa.Schema:
    fields = [pa.field(name, pa.string(), nullable=False, metadata=_PLAIN) for name in FILTER_COLUMNS]
    fields += [pa.field(name, pa.string(), nullable=False, metadata=_PLAIN) for name in TEXT_COLUMNS]
    fields += [
        pa.field("vector", pa.list_(pa.float32(), dim), nullable=False),
        pa.field("model", pa.string(), nullable=False),  # "" = no vector yet (keyword-only)
        pa.field("hash", pa.string(), nullable=False),
        pa.field("embed_hash", pa.string(), nullable=False),
    ]
    return pa.schema(fields, metadata={"memoryd.schema": SCHEMA_VERSION, "memoryd.dim": str(dim)})


def _connect(path: Path) -> tuple[lancedb.Session, lancedb.DBConnection]:
    """A LanceDB session with bounded caches (:data:`INDEX_CACHE_BYTES`) and a connection to ``path``."""
    session = lancedb.Session(
        index_cache_size_bytes=INDEX_CACHE_BYTES, metadata_cache_size_bytes=METADATA_CACHE_BYTES
    )
    return session, lancedb.connect(str(path), session=session)


def _quote(value: str) -> str:
    """A SQL string literal for LanceDB filters (single quotes doubled)."""
    return "'" + value.replace("'", "''") + "'"


def where_sql(where: Filter) -> str | None:
    """``where`` as a LanceDB SQL filter (None for a filter that passes every row): the only place a
    filter becomes SQL. Raises ValueError for a column the table does not have."""
    parts = []
    for column, values, keep in where.terms:
        if column not in FILTER_COLUMNS:
            raise ValueError(f"no column {column!r} to filter on")
        if len(values) == 1:
            parts.append(f"{column} {'=' if keep else '!='} {_quote(next(iter(values)))}")
        elif values:
            listed = ", ".join(_quote(v) for v in sorted(values))
            parts.append(f"{column} {'IN' if keep else 'NOT IN'} ({listed})")
        else:
            parts.append("FALSE" if keep else "TRUE")
    return " AND ".join(parts) or None


@dataclass(frozen=True)
class StoredHash:
    hash: str
    embed_hash: str
    model: str


class IndexStore:
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

    def _build_fts(self) -> None:
        if not self._fts_ready:  # signatures noted before held terms as written, not as the index stems them
            self.signatures = owned.Signatures()
        for col in TEXT_COLUMNS:
            # our own term strings are already tokenised: split on spaces, stem English, no stop words
            cfg = FTS(base_tokenizer="whitespace", stem=True, remove_stop_words=False, with_position=False)
            self._table.create_index(col, config=cfg, replace=True)
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

    # -- writes ----------------------------------------------------------------------------------
    def upsert(self, records: Sequence[Record], vectors: np.ndarray | None, model: str) -> None:
        """Insert or replace ``records`` (one batch = one LanceDB version).

        ``vectors``: float32 ``(len(records), dim)`` or None (keyword-only; ``model`` is then "").
        """
        if not records:
            return
        if vectors is not None and vectors.shape != (len(records), self.dim):
            raise ValueError(f"vectors shape {vectors.shape} != ({len(records)}, {self.dim})")
        vecs = np.asarray(vectors, dtype=np.float32) if vectors is not None else None
        data = []
        for rec in records:
            row = {name: getattr(rec, name) for name in FILTER_COLUMNS + TEXT_COLUMNS}  # lang is a property
            row["model"] = model if vecs is not None else ""
            row["hash"] = rec.content_hash
            row["embed_hash"] = rec.embed_hash
            data.append(row)
        if len({r.id for r in records}) != len(records):  # as LanceDB's merge refuses it
            raise ValueError("an id occurs twice in one upsert batch")
        with self._write_lock:
            present = [r.id for r in records if r.id in self.mem.snap.pos]
            old = self.rows(present, ("id", *TEXT_COLUMNS))
            snap = self.mem.prepare_upsert(data, vecs)
            tokens = self._tail_tokens(records) if self._fts_ready else None
            fresh = [n for n, row in enumerate(data) if row["id"] not in old]
            again = [n for n, row in enumerate(data) if row["id"] in old]
            if again:
                (
                    self._table.merge_insert("id")
                    .when_matched_update_all()
                    .when_not_matched_insert_all()
                    .execute(self._arrow(data, vecs, again))
                )
            if fresh:  # new ids: an append (a few ms) instead of a merge, which joins on every stored id
                self._table.add(self._arrow(data, vecs, fresh))
            self.mem.publish(snap)  # after the table write: a failed write leaves memory as it was
            for row in old.values():
                self.stats.add(row["text_main"], row["text_aux"], -1)
            for rec in records:
                self.stats.add(rec.text_main, rec.text_aux)
            if tokens is not None:
                for rec, per in zip(records, tokens, strict=True):
                    self.tail.put(rec.id, per)
            else:  # the first rows: build the text indexes over them (tens of ms), then nothing is a tail
                self._build_fts()
                tokens = self._tail_tokens(records)
            mark = self._mark = self._mark or (self.stems([GROUP_MARK]) or [GROUP_MARK])[0]
            for rec, per in zip(records, tokens, strict=True):
                self.signatures.note(rec.id, per[0], per[1], mark)

    def _arrow(self, rows: Sequence[dict], vecs: np.ndarray | None, pick: list[int]) -> pa.Table:
        """Rows ``pick`` of ``rows`` (every column but the vector) with their vectors (zeros when
        ``vecs`` is None) as a table of the index's schema. The vectors go in as one float32 block: as
        Python lists they cost ~5 ms per 50 rows of 384 floats, on the writer's path."""
        schema = _schema(self.dim)
        block = vecs[pick] if vecs is not None else np.zeros((len(pick), self.dim), np.float32)
        columns = []
        for field in schema:
            if field.name == "vector":
                flat = pa.array(np.ascontiguousarray(block, np.float32).reshape(-1), pa.float32())
                columns.append(pa.FixedSizeListArray.from_arrays(flat, self.dim))
            else:
                columns.append(pa.array([rows[n][field.name] for n in pick], field.type))
        return pa.Table.from_arrays(columns, schema=schema)

    def _tail_tokens(self, records: Sequence[Record]) -> list[list[list[str]]]:
        """Per record, its tokens per text column (one tokenizer call per column)."""
        cols = [keyword.tokens(self._table, [getattr(r, c) for r in records], c) for c in TEXT_COLUMNS]
        return [[col[n] for col in cols] for n in range(len(records))]

    def _refresh(self) -> None:
        """Compact and fold every row into the text indexes, keeping old versions (readers of an older
        version need no lock); the tail is then empty."""
        with self._write_lock:
            self._table.optimize(cleanup_older_than=timedelta(days=36500))
            self.tail.clear()
            self._untailed = False
            self._reopen()

    def refresh(self) -> None:
        """Fold the tail into the text indexes (:meth:`_refresh`); safe while searches run."""
        if len(self.tail) or keyword.unindexed(self._table):
            self._refresh()

    def delete(self, ids: Iterable[str]) -> int:
        """Delete records by id; returns how many ids were asked for."""
        ids = list(ids)
        if not ids:
            return 0
        with self._write_lock:
            old = self.rows([i for i in ids if i in self.mem.snap.pos], ("id", *TEXT_COLUMNS))
            snap = self.mem.prepare_delete(ids)
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                self._table.delete("id IN (" + ", ".join(_quote(i) for i in chunk) + ")")
            self.mem.publish(snap)
            self.tail.drop(ids)
            self.signatures.forget(ids)
            for row in old.values():
                self.stats.add(row["text_main"], row["text_aux"], -1)
        return len(ids)

    def optimize(self, purge: bool = False) -> None:
        """Compact fragments, fold new rows into the full-text indexes, drop old versions, and drop the
        in-memory copy's dead rows (all of them with ``purge``, else once they are a tenth).

        ``purge=True`` first rewrites the live rows (:meth:`_rewrite`), then keeps only the latest version:
        deleted and replaced text leaves the disk at once. Otherwise versions older than one minute go.
        Safe while this process is the only writer.
        """
        with self._write_lock:
            if purge:
                self._rewrite()
            if not self._fts_ready and self._table.count_rows() > 0:
                self._build_fts()
            keep = timedelta(0) if purge else timedelta(minutes=1)
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the "removes every version" warning is what we want
                self._table.optimize(cleanup_older_than=keep, delete_unverified=purge)
            self.tail.clear()  # every row is in the text indexes now
            self._untailed = False
            self._reopen()
            # purge: deleted text leaves this process's memory too, not only the disk
            self.mem.compact(0.0 if purge else 0.1)
            try:
                self.stats.save(self._stats_path, self._table.version, self.count())
            except (OSError, ValueError) as exc:  # only the next open gets slower
                log.warning("termstats_not_saved", path=str(self._stats_path), error=str(exc))
            self._save_signatures()

    def _rewrite(self) -> None:
        """Write the live rows into new data files and rebuild the full-text indexes from them
        (tests/e2e/test_forgetting.py).

        LanceDB's compaction leaves a fragment with few deleted rows as it is (a deletion file hides them;
        their text stays in the data file), and an index refresh keeps the terms of deleted rows. After an
        overwrite, deleted and replaced rows live only in files of older versions, which the cleanup that
        follows removes. Caller holds ``_write_lock``.
        """
        live = self._table.to_arrow().cast(_schema(self.dim))
        self._table.add(live, mode="overwrite")
        if live.num_rows:
            self._build_fts()
        else:
            self._fts_ready = self._has_fts()

    def version(self) -> int:
        return self._table.version
