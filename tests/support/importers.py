"""Helpers for the importer tests: source files built by the tests themselves, and checks on the board.

* :func:`make_memdb` writes a database with memdb's own schema (github.com/j0hanz/memdb-mcp-server,
  ``src/core/database-schema.ts``: STRICT tables, WAL, the FTS5 table and its triggers) through ``sqlite3``;
* :func:`write_graph` writes the reference MCP memory server's ``memory.jsonl``, with a bad middle line and
  a truncated last line unless told otherwise.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

MEMDB_SCHEMA = """
PRAGMA journal_mode = WAL;
CREATE TABLE IF NOT EXISTS memories (
  id INTEGER PRIMARY KEY AUTOINCREMENT, content TEXT NOT NULL, summary TEXT, importance INTEGER DEFAULT 0,
  memory_type TEXT DEFAULT 'general', created_at TEXT DEFAULT CURRENT_TIMESTAMP,
  accessed_at TEXT DEFAULT CURRENT_TIMESTAMP, hash TEXT UNIQUE NOT NULL) STRICT;
CREATE TABLE IF NOT EXISTS tags (memory_id INTEGER NOT NULL, tag TEXT NOT NULL, PRIMARY KEY (memory_id, tag),
  FOREIGN KEY (memory_id) REFERENCES memories(id) ON DELETE CASCADE) STRICT;
CREATE TABLE IF NOT EXISTS relationships (id INTEGER PRIMARY KEY AUTOINCREMENT, from_memory_id INTEGER NOT NULL,
  to_memory_id INTEGER NOT NULL, relation_type TEXT NOT NULL, created_at TEXT DEFAULT CURRENT_TIMESTAMP,
  FOREIGN KEY (from_memory_id) REFERENCES memories(id) ON DELETE CASCADE,
  FOREIGN KEY (to_memory_id) REFERENCES memories(id) ON DELETE CASCADE,
  UNIQUE(from_memory_id, to_memory_id, relation_type)) STRICT;
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(content, summary, content_rowid='id');
CREATE TRIGGER IF NOT EXISTS memories_ai AFTER INSERT ON memories BEGIN
  INSERT INTO memories_fts(rowid, content, summary) VALUES (new.id, new.content, new.summary);
END;
"""

#: (content, importance, memory_type, created_at, tags) of the clean rows; ids 1..5 in this order.
MEMDB_ROWS = [
    (
        "Deploys go through the blue/green switch on the load balancer",
        7,
        "decision",
        "2024-05-01 12:30:00",
        ["deploy", "ops"],
    ),
    ("The CI cache key includes the lockfile hash", 3, "fact", "2024-05-02 08:00:00", ["ci"]),
    (
        "Flaky test: the payment webhook mock needs a fixed clock",
        5,
        "lesson",
        "2024-05-03 09:15:00",
        ["tests", "payments"],
    ),
    ("Plan: move the nightly export to the job queue", 0, "plan", "2024-05-04 10:00:00", []),
    (
        "Zanzibar quokka: the staging database password rotates monthly",
        9,
        "fact",
        "2024-05-05 11:00:00",
        ["staging"],
    ),
]
#: (from id, to id, type): 1 -> 2, 1 -> 3, 3 -> 2, 4 -> 1.
MEMDB_RELATIONS = [(1, 2, "depends_on"), (1, 3, "related_to"), (3, 2, "caused_by"), (4, 1, "follows")]


def make_memdb(path: Path, rows=MEMDB_ROWS, relations=MEMDB_RELATIONS, extra_sql: str = "") -> Path:
    """A memdb database at ``path`` holding ``rows`` (ids from 1) and ``relations``; ``extra_sql`` runs
    last (to plant bad rows)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.executescript(MEMDB_SCHEMA)
    for n, (content, importance, mtype, created, tags) in enumerate(rows, 1):
        conn.execute(
            "INSERT INTO memories (id, content, importance, memory_type, created_at, accessed_at, hash) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (n, content, importance, mtype, created, created, f"h{n}"),
        )
        conn.executemany("INSERT INTO tags (memory_id, tag) VALUES (?, ?)", [(n, t) for t in tags])
    conn.executemany(
        "INSERT INTO relationships (from_memory_id, to_memory_id, relation_type) VALUES (?, ?, ?)", relations
    )
    if extra_sql:
        conn.executescript(extra_sql)
    conn.commit()
    conn.close()
    return path


#: Entities of the reference-server graph: (name, entityType, observations).
GRAPH_ENTITIES = [
    ("John Smith", "person", ["Speaks fluent Spanish", "Owns the billing service on-call rota"]),
    ("Billing", "service", ["Runs the nightly invoice job", "Written in Go"]),
    ("Acme Corp", "organization", ["Main customer of the billing service"]),
]
GRAPH_RELATIONS = [
    ("John Smith", "Billing", "maintains"),
    ("Billing", "Acme Corp", "serves"),
    ("John Smith", "Acme Corp", "works with"),  # a space: stored as works_with
]


def write_graph(path: Path, *, bad_middle: bool = True, truncated_tail: bool = True) -> Path:
    """The reference server's JSONL: entities then relations (as its ``saveGraph`` writes them), with a
    broken line 3 and a last line cut mid-object when asked."""
    lines = [
        json.dumps({"type": "entity", "name": n, "entityType": t, "observations": o})
        for n, t, o in GRAPH_ENTITIES
    ]
    lines += [
        json.dumps({"type": "relation", "from": a, "to": b, "relationType": r}) for a, b, r in GRAPH_RELATIONS
    ]
    if bad_middle:
        lines.insert(2, '{"type":"entity","name":"Half written", "entityType": "pers')  # line 3
    text = "\n".join(lines) + "\n"
    if truncated_tail:
        text += '{"type":"entity","name":"Cut off","entityType":"person","observ'  # no newline: truncated
    path.write_text(text, encoding="utf-8")
    return path


def board_snapshot(board: Path) -> dict[str, bytes]:
    """Every file under ``board`` and its bytes (to prove a run wrote nothing)."""
    if not board.exists():
        return {}
    return {str(p.relative_to(board)): p.read_bytes() for p in sorted(board.rglob("*")) if p.is_file()}


def run_cli(*args: str, env_home: Path) -> subprocess.CompletedProcess:
    """``python -m memoryd <args>`` in a subprocess, isolated under ``env_home``."""
    env = {**os.environ, "MEMORYD_HOME": str(env_home), "LANCEDB_LOG": "error"}
    return subprocess.run(
        [sys.executable, "-m", "memoryd", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
