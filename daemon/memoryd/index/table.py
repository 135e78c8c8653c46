"""The records table's layout and connection: its columns, schema, LanceDB session and SQL filters.

One table, ``records``: the filter columns (:data:`FILTER_COLUMNS`, all strings), the two keyword columns
(:data:`TEXT_COLUMNS`, BM25 weights :data:`TEXT_BOOSTS`), a ``vector`` of ``dim`` float32, the ``model``
that made it ("" = none yet) and the two hashes that make syncing incremental. :func:`where_sql` is the only
place a :class:`~memoryd.index.columns.Filter` becomes SQL.
"""

from __future__ import annotations

import os

os.environ.setdefault("LANCEDB_LOG", "error")  # before lancedb loads: its Rust warnings are plain text

from pathlib import Path

import lancedb
import pyarrow as pa

from memoryd.index.columns import Filter

TABLE = "records"
SCHEMA_VERSION = "2"
FILTER_COLUMNS = ("id", "kind", "project", "task", "status", "created_at", "title", "line", "lang")
TEXT_COLUMNS = ("text_main", "text_aux")
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
#: with the table opened again through a new session after each
#: (:meth:`memoryd.index.store.IndexStore._reopen`); a search after a refresh loads the new indexes either
#: way (first query 6-21 ms both ways on a loaded machine).


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
