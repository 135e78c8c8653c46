"""The write half of :class:`memoryd.index.store.IndexStore`: upsert, delete, refresh and optimize.

A mixin: :class:`StoreWrites` uses the store's table, in-memory columns (``mem``), keyword tail, term
statistics and own-evidence signatures, and runs every write under its ``_write_lock``. Each upsert or
delete batch is one LanceDB version; vectors are float32 ``(rows, dim)``. LanceDB errors propagate.

A fold of the keyword tail (:meth:`StoreWrites.refresh`) holds ``_fold_lock`` instead for its LanceDB
call (hundreds of ms at 10,000 rows): appends of new rows go on beside it (LanceDB commits an append
beside a compaction; the rows stay in the tail), while merges, deletes and compactions wait for it.
"""

from __future__ import annotations

import contextlib
import os

os.environ.setdefault("LANCEDB_LOG", "error")  # before lancedb loads: its Rust warnings are plain text

from collections.abc import Iterable, Sequence
from datetime import timedelta

import numpy as np
import pyarrow as pa

from memoryd.index import keyword
from memoryd.index.records import Record
from memoryd.index.table import FILTER_COLUMNS, TEXT_COLUMNS, _quote, _schema
from memoryd.index.terms import GROUP_MARK
from memoryd.logs import get_logger

log = get_logger("memoryd.index.store")


class StoreWrites:
    """Writes of the records table; mixed into :class:`memoryd.index.store.IndexStore`."""

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
        # a merge rewrites rows a fold may be compacting: it waits for the fold; an append need not
        merging = any(r.id in self.mem.snap.pos for r in records)
        with self._fold_lock if merging else contextlib.nullcontext(), self._write_lock:
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
        """Compact and fold every row written so far into the text indexes, keeping old versions (readers
        of an older version need no lock); those rows leave the tail. Rows appended meanwhile stay in it
        (the indexes may cover them as well: the tail's score is a row's own then)."""
        with self._fold_lock:
            with self._write_lock:
                covered, table = self.tail.ids(), self._table
            table.optimize(cleanup_older_than=timedelta(days=36500))
            with self._write_lock:
                self.tail.drop(covered)
                self._untailed = False
                self._reopen()

    def refresh(self) -> None:
        """Fold the tail into the text indexes (:meth:`_refresh`); safe while searches run, and beside
        appends of new rows (:meth:`upsert`)."""
        if len(self.tail) or keyword.unindexed(self._table):
            self._refresh()

    def delete(self, ids: Iterable[str]) -> int:
        """Delete records by id; returns how many ids were asked for."""
        ids = list(ids)
        if not ids:
            return 0
        with self._fold_lock, self._write_lock:
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
        with self._fold_lock, self._write_lock:
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
