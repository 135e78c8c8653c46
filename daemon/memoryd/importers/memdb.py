"""Importer for memdb's SQLite database (``<workspace>/.memdb/memory.db``).

The schema read is memdb's (github.com/j0hanz/memdb-mcp-server, ``src/core/database-schema.ts``)::

    memories(id INTEGER PRIMARY KEY, content TEXT, summary TEXT, importance INTEGER, memory_type TEXT,
             created_at TEXT, accessed_at TEXT, hash TEXT UNIQUE)        -- timestamps: CURRENT_TIMESTAMP, UTC
    tags(memory_id INTEGER, tag TEXT)
    relationships(id INTEGER PRIMARY KEY, from_memory_id INTEGER, to_memory_id INTEGER, relation_type TEXT,
                  created_at TEXT)

Column variants are tolerated (looked up by name, see the ``_*_COLUMNS`` tuples): ``type`` for
``memory_type``, ``last_accessed``/``updated_at`` for ``accessed_at``, tags in a ``memory_tags`` table or in a
``tags`` column of ``memories`` (a JSON array or comma-separated text), relationships in ``relations`` or
``memory_relationships`` with ``source_id``/``target_id`` and ``type``/``relationship_type``. memdb's own
``hash`` column is not reused (memoryd hashes the normalised content); its ``summary``, which no memdb tool
sets, is not carried. A ``memory_type`` outside memoryd's eight (older memdb versions took any word) becomes
``general`` with the original kept as the tag ``memdb-type:<type>``.

Rows are numbered by their ``id`` (``memories row 12``, ``relationships row 3``). The database is opened
read-only and never changed.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from memoryd.importers import MEMORY_TYPES, ImportItem, ImportProblem, ImportRelation, SourceUnreadable
from memoryd.importers.values import importance_value, iso_utc, unique, word

DESCRIPTION = "a memdb SQLite database (<workspace>/.memdb/memory.db)"

_CONTENT_COLUMNS = ("content", "text", "body")
_TYPE_COLUMNS = ("memory_type", "type")
_CREATED_COLUMNS = ("created_at", "created", "timestamp")
_ACCESSED_COLUMNS = ("accessed_at", "last_accessed", "last_accessed_at", "updated_at")
_TAG_TABLES = ("tags", "memory_tags")
_RELATION_TABLES = ("relationships", "relations", "memory_relationships")
_FROM_COLUMNS = ("from_memory_id", "source_id", "from_id", "source_memory_id")
_TO_COLUMNS = ("to_memory_id", "target_id", "to_id", "target_memory_id")
_RELTYPE_COLUMNS = ("relation_type", "relationship_type", "type")


def default_project(path: Path) -> str | None:
    """The workspace folder's name for ``<workspace>/.memdb/memory.db`` (memdb keeps one database per
    workspace, as memoryd names a project by its folder); None for a database elsewhere."""
    path = Path(path).absolute()
    if path.parent.name == ".memdb" and path.parent.parent.name:
        return path.parent.parent.name
    return None


def _open(path: Path) -> sqlite3.Connection:
    if not path.is_file():
        raise SourceUnreadable(f"{path} is not a file")
    uri = f"file:{quote(str(path.absolute()))}"
    try:
        conn = sqlite3.connect(f"{uri}?mode=ro", uri=True)
        conn.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.OperationalError:
        # a WAL database in a folder we cannot write (no -shm) opens only as immutable
        try:
            conn = sqlite3.connect(f"{uri}?immutable=1", uri=True)
            conn.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.DatabaseError as exc:
            raise SourceUnreadable(f"{path}: {exc}") from None
    except sqlite3.DatabaseError as exc:
        raise SourceUnreadable(f"{path} is not a SQLite database ({exc})") from None
    conn.text_factory = bytes  # decode per value: one row of invalid UTF-8 must not stop the import
    return conn


def _tables(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')").fetchall()
    return {_text(name) for (name,) in rows}


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [_text(row[1]) for row in conn.execute(f'PRAGMA table_info("{table}")').fetchall()]


def _pick(columns: list[str], names: tuple[str, ...]) -> str | None:
    return next((n for n in names if n in columns), None)


def _text(value: object) -> str:
    """A column value as text; raises UnicodeDecodeError for invalid UTF-8."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return "" if value is None else str(value)


def _key(value: object) -> str:
    return _text(value) if isinstance(value, bytes) else str(value)


def _tag_list(raw: object) -> list[str]:
    """A ``tags`` column: a JSON array, or comma-separated text."""
    text = _text(raw).strip()
    if not text:
        return []
    if text.startswith("["):
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if isinstance(value, list):
            return [str(t).strip() for t in value if str(t).strip()]
    return [t.strip() for t in text.split(",") if t.strip()]


def _load_tags(conn: sqlite3.Connection, tables: set[str]) -> dict[str, list[str]]:
    for table in _TAG_TABLES:
        if table not in tables:
            continue
        cols = _columns(conn, table)
        if "memory_id" in cols and "tag" in cols:
            out: dict[str, list[str]] = {}
            for memory_id, tag in conn.execute(f'SELECT memory_id, tag FROM "{table}" ORDER BY rowid'):
                try:
                    out.setdefault(_key(memory_id), []).append(_text(tag))
                except UnicodeDecodeError:
                    continue  # an undecodable tag is dropped; its memory still comes
            return out
    return {}


def iter_items(path: Path) -> Iterator[ImportItem | ImportRelation | ImportProblem]:
    """Every memory, then every relationship, of the memdb database at ``path`` (see the module doc)."""
    conn = _open(Path(path))
    try:
        tables = _tables(conn)
        if "memories" not in tables:
            raise SourceUnreadable(f"{path} has no memories table (not a memdb database)")
        yield from _memories(conn, tables)
        yield from _relations(conn, tables)
    except sqlite3.DatabaseError as exc:
        raise SourceUnreadable(f"{path}: {exc}") from None
    finally:
        conn.close()


def _memories(conn: sqlite3.Connection, tables: set[str]) -> Iterator[ImportItem | ImportProblem]:
    cols = _columns(conn, "memories")
    content_col = _pick(cols, _CONTENT_COLUMNS)
    if content_col is None:
        raise SourceUnreadable(f"memories has no content column (columns: {', '.join(cols)})")
    id_col = "id" if "id" in cols else "rowid"
    wanted = {
        "id": id_col,
        "content": content_col,
        "importance": "importance" if "importance" in cols else None,
        "type": _pick(cols, _TYPE_COLUMNS),
        "created": _pick(cols, _CREATED_COLUMNS),
        "accessed": _pick(cols, _ACCESSED_COLUMNS),
        "tags": "tags" if "tags" in cols else None,
    }
    names = [k for k, v in wanted.items() if v]
    select = ", ".join(f'"{wanted[k]}"' if wanted[k] != "rowid" else "rowid" for k in names)
    tag_rows = _load_tags(conn, tables)
    order = "rowid" if id_col == "rowid" else f'"{id_col}"'
    for values in conn.execute(f"SELECT {select} FROM memories ORDER BY {order}"):
        row = dict(zip(names, values, strict=True))
        key = _key(row["id"])
        where = f"memories row {key}"
        try:
            content = _text(row["content"]) if row["content"] is not None else None
        except UnicodeDecodeError:
            yield ImportProblem(where, "content is not valid UTF-8")
            continue
        if content is None:
            yield ImportProblem(where, "content is NULL")
            continue
        try:
            importance = importance_value(row.get("importance"))
        except ValueError as exc:
            yield ImportProblem(where, str(exc))
            continue
        tags = list(tag_rows.get(key, []))
        try:
            if row.get("tags") is not None:
                tags += _tag_list(row["tags"])
            memory_type = _text(row.get("type")).strip() or "general"
            created = iso_utc(_text(row.get("created")) or None)
            accessed = iso_utc(_text(row.get("accessed")) or None)
        except UnicodeDecodeError:
            yield ImportProblem(where, "a tag, type or timestamp is not valid UTF-8")
            continue
        if memory_type not in MEMORY_TYPES:
            tags.append(f"memdb-type:{word(memory_type)}")
            memory_type = "general"
        yield ImportItem(
            key=key,
            content=content,
            where=where,
            tags=unique(tags),
            importance=importance,
            memory_type=memory_type,
            created_at=created,
            accessed_at=accessed,
        )


def _relations(conn: sqlite3.Connection, tables: set[str]) -> Iterator[ImportRelation | ImportProblem]:
    table = next((t for t in _RELATION_TABLES if t in tables), None)
    if table is None:
        return
    cols = _columns(conn, table)
    src, dst, kind = _pick(cols, _FROM_COLUMNS), _pick(cols, _TO_COLUMNS), _pick(cols, _RELTYPE_COLUMNS)
    if src is None or dst is None or kind is None:
        yield ImportProblem(
            table, f"no from/to/type columns found (columns: {', '.join(cols)}); relations skipped"
        )
        return
    id_col = "id" if "id" in cols else "rowid"
    created_col = "created_at" if "created_at" in cols else None
    select = ", ".join(
        [id_col if id_col == "rowid" else f'"{id_col}"', f'"{src}"', f'"{dst}"', f'"{kind}"']
        + ([f'"{created_col}"'] if created_col else [])
    )
    order = "rowid" if id_col == "rowid" else f'"{id_col}"'
    for values in conn.execute(f'SELECT {select} FROM "{table}" ORDER BY {order}'):
        rid, a, b, rtype = values[:4]
        where = f"{table} row {_key(rid)}"
        if a is None or b is None:
            yield ImportProblem(where, "from or to memory id is NULL")
            continue
        try:
            relation_type = word(_text(rtype))
            created = iso_utc(_text(values[4]) or None) if created_col else None
        except UnicodeDecodeError:
            yield ImportProblem(where, "relation type is not valid UTF-8")
            continue
        yield ImportRelation(_key(a), _key(b), relation_type, where, created)
