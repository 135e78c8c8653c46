"""The LanceDB table of records: the only module that talks to LanceDB.

One table, ``records``: filter columns (kind, project, task, status, created_at), two keyword columns
with BM25 full-text indexes (``text_main`` weighted above ``text_aux``), a vector column for the
meaning half, and the hashes that make syncing incremental. Everything here is derived from the board
and may be deleted at any time; :class:`IndexStore` then starts empty and the sync rebuilds it.

Writes are meant to come in batches from one writer (each LanceDB write adds a fragment and a
version); :meth:`IndexStore.optimize` compacts, refreshes the full-text indexes and drops old
versions, so deleted text also leaves the bytes on disk.
"""

from __future__ import annotations

import os

os.environ.setdefault("LANCEDB_LOG", "error")  # before lancedb loads: its Rust warnings are plain text

import math
import shutil
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import FTS
from lancedb.query import MultiMatchQuery

from memoryd.index.records import Record
from memoryd.logs import get_logger

log = get_logger("memoryd.index.store")

TABLE = "records"
SCHEMA_VERSION = "2"
FILTER_COLUMNS = ("id", "kind", "project", "task", "status", "created_at", "title", "line", "lang")
TEXT_COLUMNS = ("text_main", "text_aux")
#: BM25 weight of each text column: what the person said and the titles count more than screen text.
TEXT_BOOSTS = (2.0, 1.0)


def _schema(dim: int) -> pa.Schema:
    fields = [pa.field(name, pa.string(), nullable=False) for name in FILTER_COLUMNS]
    fields += [pa.field(name, pa.string(), nullable=False) for name in TEXT_COLUMNS]
    fields += [
        pa.field("vector", pa.list_(pa.float32(), dim), nullable=False),
        pa.field("model", pa.string(), nullable=False),  # "" = no vector yet (keyword-only)
        pa.field("hash", pa.string(), nullable=False),
        pa.field("embed_hash", pa.string(), nullable=False),
    ]
    return pa.schema(fields, metadata={"memoryd.schema": SCHEMA_VERSION, "memoryd.dim": str(dim)})


def quote(value: str) -> str:
    """A SQL string literal for LanceDB filters (single quotes doubled)."""
    return "'" + value.replace("'", "''") + "'"


class TermStats:
    """Document frequencies of keyword terms, kept in memory beside the table.

    LanceDB computes BM25 but does not expose IDF; search needs it to tell a match on rare query
    terms from an accidental match on common ones (the keyword half's confidence). Updated
    incrementally on every write; rebuilt from the table on open.
    """

    def __init__(self) -> None:
        self.df: Counter[str] = Counter()
        self.docs = 0

    def add(self, text_main: str, text_aux: str, sign: int = 1) -> None:
        self.df.update({t: sign for t in set(text_main.split()) | set(text_aux.split())})
        self.docs += sign

    def idf(self, term: str) -> float:
        """BM25's IDF (Robertson–Spärck Jones, with Lucene's +1 to stay positive)."""
        n = self.df.get(term, 0)
        return math.log(1.0 + (self.docs - n + 0.5) / (n + 0.5))


@dataclass(frozen=True)
class StoredHash:
    hash: str
    embed_hash: str
    model: str


class IndexStore:
    """The records table at ``path`` (a folder), with vectors of ``dim`` floats.

    Thread-safety: reads may run concurrently from several threads; writes must come from one writer
    at a time (an internal lock serialises them anyway).
    """

    def __init__(self, path: Path, dim: int = 384) -> None:
        self.path = Path(path)
        self.dim = dim
        self._write_lock = threading.Lock()
        self.path.mkdir(parents=True, exist_ok=True)
        os.chmod(self.path, 0o700)
        self._db = lancedb.connect(str(self.path))
        self._table = self._open_or_create()
        self._fts_ready = self._has_fts()
        self.stats = TermStats()
        self._projects: set[str] | None = None
        self._load_stats()

    # -- lifecycle -------------------------------------------------------------------------------
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
        return self._db.create_table(TABLE, schema=_schema(self.dim))

    def _load_stats(self) -> None:
        for batch in self._table.search().select(list(TEXT_COLUMNS)).limit(None).to_batches():
            for main, aux in zip(
                batch.column("text_main").to_pylist(), batch.column("text_aux").to_pylist(), strict=True
            ):
                self.stats.add(main, aux)

    def _has_fts(self) -> bool:
        names = {cfg.columns[0] for cfg in self._table.list_indices() if cfg.index_type == "FTS"}
        return all(col in names for col in TEXT_COLUMNS)

    def _build_fts(self) -> None:
        for col in TEXT_COLUMNS:
            # our own term strings are already tokenised: split on spaces, stem English, no stop words
            cfg = FTS(base_tokenizer="whitespace", stem=True, remove_stop_words=False, with_position=False)
            self._table.create_index(col, config=cfg, replace=True)
        self._fts_ready = True

    @staticmethod
    def wipe(path: Path) -> None:
        """Delete the whole index folder (it is a cache of the board)."""
        shutil.rmtree(path, ignore_errors=True)

    # -- reads -----------------------------------------------------------------------------------
    def count(self) -> int:
        return self._table.count_rows()

    def counts_by_kind(self) -> dict[str, int]:
        tbl = self._table.search().select(["kind"]).limit(None).to_arrow()
        kinds = tbl.column("kind").to_pylist()
        return {k: kinds.count(k) for k in sorted(set(kinds))}

    def projects(self) -> set[str]:
        """Distinct project names (cached until the next write)."""
        if self._projects is None:
            tbl = self._table.search().select(["project"]).limit(None).to_arrow()
            self._projects = {p for p in tbl.column("project").to_pylist() if p}
        return self._projects

    def stored_hashes(self, kind: str | None = None) -> dict[str, StoredHash]:
        """id -> hashes and model of every stored record (of ``kind`` when given)."""
        q = self._table.search().select(["id", "hash", "embed_hash", "model"]).limit(None)
        if kind:
            q = q.where(f"kind = {quote(kind)}")
        tbl = q.to_arrow()
        return {
            i: StoredHash(h, e, m)
            for i, h, e, m in zip(
                tbl.column("id").to_pylist(),
                tbl.column("hash").to_pylist(),
                tbl.column("embed_hash").to_pylist(),
                tbl.column("model").to_pylist(),
                strict=True,
            )
        }

    def stored_hashes_for(self, ids: Sequence[str]) -> dict[str, StoredHash]:
        """Hashes and model of the given ids (absent ids are left out)."""
        got = self.rows(ids, ("id", "hash", "embed_hash", "model"))
        return {i: StoredHash(r["hash"], r["embed_hash"], r["model"]) for i, r in got.items()}

    def rows(self, ids: Sequence[str], columns: Sequence[str] = FILTER_COLUMNS) -> dict[str, dict]:
        """The stored columns of ``ids`` (missing ids are absent from the answer)."""
        if not ids:
            return {}
        out: dict[str, dict] = {}
        ids = list(ids)
        for start in range(0, len(ids), 500):
            in_list = ", ".join(quote(i) for i in ids[start : start + 500])
            got = self._table.search().where(f"id IN ({in_list})").select(list(columns)).limit(None).to_list()
            out.update((r["id"], r) for r in got)
        return out

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors by id (only rows that have one)."""
        got = self.rows(ids, ("id", "vector", "model"))
        return {i: np.asarray(r["vector"], dtype=np.float32) for i, r in got.items() if r["model"]}

    def keyword(self, query_terms: str, where: str | None, limit: int) -> list[tuple[str, float]]:
        """BM25 over the text columns: ``[(id, score)]`` best first. ``query_terms`` are our own terms
        (never user syntax); an empty string or an index with no rows gives ``[]``."""
        if not query_terms.strip() or self.count() == 0:
            return []
        if not self._fts_ready:
            with self._write_lock:
                if not self._fts_ready:
                    self._build_fts()
        q = MultiMatchQuery(query_terms, list(TEXT_COLUMNS), boosts=list(TEXT_BOOSTS))
        builder = self._table.search(q, query_type="fts").select(["id", "_score"]).limit(limit)
        if where:
            builder = builder.where(where, prefilter=True)
        return [(r["id"], float(r["_score"])) for r in builder.to_list()]

    def nearest(self, vector: np.ndarray, where: str | None, limit: int) -> list[tuple[str, float]]:
        """Cosine similarity search over rows that have a vector: ``[(id, cosine)]`` best first."""
        clause = "model != ''" + (f" AND ({where})" if where else "")
        builder = (
            self._table.search(np.asarray(vector, dtype=np.float32), vector_column_name="vector")
            .distance_type("dot")
            .where(clause, prefilter=True)
            .select(["id", "_distance"])
            .limit(limit)
        )
        # vectors are L2-normalised, so dot "distance" = 1 - cosine
        return [(r["id"], 1.0 - float(r["_distance"])) for r in builder.to_list()]

    # -- writes ----------------------------------------------------------------------------------
    def upsert(self, records: Sequence[Record], vectors: np.ndarray | None, model: str) -> None:
        """Insert or replace ``records`` (one batch = one LanceDB version).

        ``vectors``: float32 ``(len(records), dim)`` or None (keyword-only; ``model`` is then "").
        """
        if not records:
            return
        if vectors is not None and vectors.shape != (len(records), self.dim):
            raise ValueError(f"vectors shape {vectors.shape} != ({len(records)}, {self.dim})")
        zero = [0.0] * self.dim
        data = []
        for i, rec in enumerate(records):
            row = {name: getattr(rec, name) for name in FILTER_COLUMNS + TEXT_COLUMNS}  # lang is a property
            row["vector"] = vectors[i].tolist() if vectors is not None else zero
            row["model"] = model if vectors is not None else ""
            row["hash"] = rec.content_hash
            row["embed_hash"] = rec.embed_hash
            data.append(row)
        table = pa.Table.from_pylist(data, schema=_schema(self.dim))
        with self._write_lock:
            old = self.rows([r.id for r in records], ("id", *TEXT_COLUMNS))
            (
                self._table.merge_insert("id")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute(table)
            )
            for row in old.values():
                self.stats.add(row["text_main"], row["text_aux"], -1)
            for rec in records:
                self.stats.add(rec.text_main, rec.text_aux)
            self._projects = None

    def delete(self, ids: Iterable[str]) -> int:
        """Delete records by id; returns how many ids were asked for."""
        ids = list(ids)
        if not ids:
            return 0
        with self._write_lock:
            old = self.rows(ids, ("id", *TEXT_COLUMNS))
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                self._table.delete("id IN (" + ", ".join(quote(i) for i in chunk) + ")")
            for row in old.values():
                self.stats.add(row["text_main"], row["text_aux"], -1)
        return len(ids)

    def optimize(self, purge: bool = False) -> None:
        """Compact fragments, fold new rows into the full-text indexes, drop old versions.

        ``purge=True`` keeps only the latest version (deleted text leaves the disk at once); otherwise
        versions older than one minute go. Safe while this process is the only writer.
        """
        with self._write_lock:
            if not self._fts_ready and self._table.count_rows() > 0:
                self._build_fts()
            keep = timedelta(0) if purge else timedelta(minutes=1)
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the "removes every version" warning is what we want
                self._table.optimize(cleanup_older_than=keep, delete_unverified=purge)

    def version(self) -> int:
        return self._table.version
