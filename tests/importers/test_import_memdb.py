"""``memoryd import --from memdb``: a memdb-shaped SQLite database (built here) onto a board of files."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from memoryd.importers import SourceUnreadable
from memoryd.importers.apply import run_import
from memoryd.kinds.memories.files import content_hash, list_memories, read_memory
from support.importers import MEMDB_RELATIONS, MEMDB_ROWS, board_snapshot, make_memdb, run_cli

BAD_ROWS = """
INSERT INTO memories (id, content, importance, memory_type, hash) VALUES (6, '', 1, 'fact', 'h6');
INSERT INTO memories (id, content, importance, memory_type, hash) VALUES (7, 'Too important', 11, 'fact', 'h7');
INSERT INTO memories (id, content, importance, memory_type, hash)
  VALUES (8, CAST(x'48656c6c6fff' AS TEXT), 1, 'fact', 'h8');
INSERT INTO relationships (from_memory_id, to_memory_id, relation_type) VALUES (7, 1, 'blocks');
"""


def memdb(tmp_path: Path, **kwargs) -> Path:
    return make_memdb(tmp_path / "shopfront" / ".memdb" / "memory.db", **kwargs)


def by_content(board: Path) -> dict:
    memories, skipped = list_memories(board)
    assert skipped == []
    return {m.content: m for m in memories}


def test_every_row_becomes_a_memory_with_its_fields(tmp_path, board):
    summary = run_import("memdb", memdb(tmp_path), board)
    assert (summary.memories_new, summary.memories_existing, summary.memories_duplicate) == (5, 0, 0)
    assert summary.problems == []
    found = by_content(board)
    assert set(found) == {row[0] for row in MEMDB_ROWS}
    for content, importance, mtype, created, tags in MEMDB_ROWS:
        m = found[content]
        assert m.id == content_hash(content)
        assert (m.importance, m.memory_type, list(m.tags)) == (importance, mtype, tags)
        assert m.created_at == created.replace(" ", "T") + "Z"  # SQLite CURRENT_TIMESTAMP is UTC
        assert m.project == "shopfront"  # the workspace that holds .memdb/
        assert m.origin == "import:memdb"


def test_relationships_are_stored_with_their_source_memory(tmp_path, board):
    summary = run_import("memdb", memdb(tmp_path), board)
    assert (summary.relations_new, summary.relations_existing) == (4, 0)
    ids = {n: content_hash(row[0]) for n, row in enumerate(MEMDB_ROWS, 1)}
    edges = set()
    for m in list_memories(board)[0]:
        edges |= {(m.id, r.type, r.target) for r in m.relations}
    assert edges == {(ids[a], t, ids[b]) for a, b, t in MEMDB_RELATIONS}
    assert read_memory(board, ids[2]).relations == ()  # only a target: no edge stored in it


def test_a_second_import_adds_nothing_and_touches_no_file(tmp_path, board):
    source = memdb(tmp_path)
    run_import("memdb", source, board)
    before = board_snapshot(board)
    again = run_import("memdb", source, board)
    assert (again.memories_new, again.memories_existing) == (0, 5)
    assert (again.relations_new, again.relations_existing) == (0, 4)
    assert board_snapshot(board) == before


def test_dry_run_writes_nothing_and_counts_what_would_change(tmp_path, board):
    source = memdb(tmp_path)
    dry = run_import("memdb", source, board, dry_run=True)
    assert not board.exists()
    assert (dry.memories_new, dry.relations_new) == (5, 4)
    real = run_import("memdb", source, board)
    assert (real.memories_new, real.relations_new) == (5, 4)
    before = board_snapshot(board)
    dry_again = run_import("memdb", source, board, dry_run=True)
    assert (dry_again.memories_new, dry_again.memories_existing, dry_again.relations_new) == (0, 5, 0)
    assert board_snapshot(board) == before


def test_bad_rows_are_reported_by_row_and_skipped(tmp_path, board):
    summary = run_import("memdb", memdb(tmp_path, extra_sql=BAD_ROWS), board)
    problems = {p.where: p.reason for p in summary.problems}
    assert set(problems) == {"memories row 6", "memories row 7", "memories row 8", "relationships row 5"}
    assert "empty" in problems["memories row 6"]
    assert "importance" in problems["memories row 7"]
    assert "UTF-8" in problems["memories row 8"]
    assert "not imported" in problems["relationships row 5"]  # its source, row 7, was skipped
    assert summary.memories_new == 5 and summary.relations_new == 4  # the good rows all came


def test_content_equal_after_normalisation_is_one_memory(tmp_path, board):
    rows = [
        ("Cafe\u0301 opens at nine\r\nsharp", 1, "fact", "2024-01-01 00:00:00", ["a"]),
        ("Caf\u00e9 opens at nine\nsharp  ", 2, "fact", "2024-01-02 00:00:00", ["b"]),
    ]
    summary = run_import("memdb", memdb(tmp_path, rows=rows, relations=[(2, 1, "same_as")]), board)
    assert (summary.memories_new, summary.memories_duplicate) == (1, 1)
    (memory,) = list_memories(board)[0]
    assert memory.content == "Caf\u00e9 opens at nine\nsharp"
    assert memory.tags == ("a",)  # the first row wins; nothing is merged
    assert [(r.type, r.target) for r in memory.relations] == [("same_as", memory.id)]


def test_column_variants_of_older_databases(tmp_path, board):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE memories (id TEXT PRIMARY KEY, content TEXT, type TEXT, importance REAL,
                               created_at INTEGER, last_accessed TEXT, tags TEXT);
        CREATE TABLE relations (source_id TEXT, target_id TEXT, type TEXT);
        INSERT INTO memories VALUES ('a', 'Use pnpm, not npm', 'rule', 6.5, 1714566600, NULL, '["tooling","js"]');
        INSERT INTO memories VALUES ('b', 'The monorepo uses turborepo', 'fact', 2, 1714566600000, NULL, 'build, js');
        INSERT INTO relations VALUES ('a', 'b', 'applies to');
        """
    )
    conn.commit()
    conn.close()
    summary = run_import("memdb", path, board, project="web")
    assert (summary.memories_new, summary.relations_new, summary.problems) == (2, 1, [])
    found = by_content(board)
    rule = found["Use pnpm, not npm"]
    assert rule.memory_type == "general" and rule.tags == ("tooling", "js", "memdb-type:rule")
    assert rule.importance == 7 and rule.project == "web"
    assert rule.created_at == "2024-05-01T12:30:00Z"
    turbo = found["The monorepo uses turborepo"]
    assert turbo.tags == ("build", "js") and turbo.created_at == "2024-05-01T12:30:00Z"  # epoch ms
    assert [(r.type, r.target) for r in rule.relations] == [("applies_to", turbo.id)]


def test_a_file_that_is_not_a_memdb_database_is_refused(tmp_path, board):
    junk = tmp_path / "memory.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(SourceUnreadable):
        run_import("memdb", junk, board)
    other = tmp_path / "other.db"
    sqlite3.connect(other).executescript("CREATE TABLE notes (x TEXT);")
    with pytest.raises(SourceUnreadable, match="no memories table"):
        run_import("memdb", other, board)
    assert not board.exists()


def test_the_command_line(tmp_path, board):
    source = memdb(tmp_path, extra_sql=BAD_ROWS)
    out = run_cli(
        "import", "--from", "memdb", str(source), "--board", str(board), "--json", env_home=tmp_path / "h"
    )
    assert out.returncode == 1, out.stderr  # imported, but rows were skipped
    report = json.loads(out.stdout)
    assert report["memories"] == {"new": 5, "existing": 0, "duplicate": 0}
    assert report["relations"] == {"new": 4, "existing": 0}
    assert {s["where"] for s in report["skipped"]} == {
        "memories row 6",
        "memories row 7",
        "memories row 8",
        "relationships row 5",
    }
    assert "memories row 7: importance" in out.stderr
    again = run_cli("import", "--from", "memdb", str(source), "--board", str(board), env_home=tmp_path / "h")
    assert "0 new, 5 already on the board" in again.stdout
    clean = run_cli(
        "import",
        "--from",
        "memdb",
        str(memdb(tmp_path / "c")),
        "--board",
        str(board),
        "--dry-run",
        env_home=tmp_path / "h",
    )
    assert clean.returncode == 0, clean.stderr
    assert "dry run: nothing was written" in clean.stdout
    missing = run_cli(
        "import", "--from", "memdb", str(tmp_path / "nope.db"), "--board", str(board), env_home=tmp_path / "h"
    )
    assert missing.returncode == 2 and "cannot read" in missing.stderr
