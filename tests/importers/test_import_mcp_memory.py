"""``memoryd import --from mcp-memory``: the reference MCP memory server's JSONL knowledge graph (written here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.importers import SourceUnreadable
from memoryd.importers.apply import run_import
from memoryd.importers.mcp_memory import render
from memoryd.kinds.memories.files import content_hash, list_memories
from support.importers import GRAPH_ENTITIES, GRAPH_RELATIONS, board_snapshot, run_cli, write_graph


def graph(tmp_path: Path, **kwargs) -> Path:
    return write_graph(tmp_path / "memory.jsonl", **kwargs)


def test_each_entity_becomes_a_tagged_memory(tmp_path, board):
    summary = run_import("mcp-memory", graph(tmp_path), board)
    assert (summary.memories_new, summary.memories_existing) == (3, 0)
    memories = {m.id: m for m in list_memories(board)[0]}
    assert len(memories) == 3
    for name, etype, observations in GRAPH_ENTITIES:
        m = memories[content_hash(render(name, etype, observations))]
        assert m.content.splitlines()[0] == f"{name} ({etype})"
        for o in observations:
            assert f"- {o}" in m.content.splitlines()
        assert m.tags == ("mcp-memory", etype)
        assert (m.memory_type, m.project, m.origin) == ("fact", "", "import:mcp-memory")


def test_relations_become_relationships_between_the_entities(tmp_path, board):
    summary = run_import("mcp-memory", graph(tmp_path), board)
    assert summary.relations_new == 3
    ids = {name: content_hash(render(name, etype, obs)) for name, etype, obs in GRAPH_ENTITIES}
    edges = {(m.id, r.type, r.target) for m in list_memories(board)[0] for r in m.relations}
    assert edges == {(ids[a], r.replace(" ", "_"), ids[b]) for a, b, r in GRAPH_RELATIONS}


def test_a_bad_middle_line_and_a_truncated_last_line_are_reported_by_number(tmp_path, board):
    summary = run_import("mcp-memory", graph(tmp_path), board)
    problems = {p.where: p.reason for p in summary.problems}
    assert set(problems) == {"line 3", "line 8"}
    assert "not valid JSON" in problems["line 3"] and "truncated" not in problems["line 3"]
    assert "truncated" in problems["line 8"]
    assert summary.memories_new == 3 and summary.relations_new == 3  # every good line came


def test_a_second_import_adds_nothing_and_touches_no_file(tmp_path, board):
    source = graph(tmp_path)
    run_import("mcp-memory", source, board)
    before = board_snapshot(board)
    again = run_import("mcp-memory", source, board)
    assert (again.memories_new, again.memories_existing, again.relations_new, again.relations_existing) == (
        0,
        3,
        0,
        3,
    )
    assert board_snapshot(board) == before


def test_dry_run_writes_nothing(tmp_path, board):
    dry = run_import("mcp-memory", graph(tmp_path), board, dry_run=True)
    assert (dry.memories_new, dry.relations_new, len(dry.problems)) == (3, 3, 2)
    assert not board.exists()


def test_odd_lines(tmp_path, board):
    lines = [
        {"type": "entity", "name": "Ghost", "entityType": "person", "observations": ["Lives in \ud800 land"]},
        {"type": "entity", "name": "Kafka", "entityType": "service", "observations": ["Holds the events"]},
        {
            "type": "entity",
            "name": "Kafka",
            "entityType": "service",
            "observations": ["Runs 3 brokers", "Holds the events"],
        },
        {"type": "relation", "from": "Kafka", "to": "Nobody", "relationType": "feeds"},
        {"type": "relation", "from": "Kafka", "to": "Kafka", "relationType": "x" * 51},
        {"type": "observation", "entityName": "Kafka"},
        [1, 2],
        {"type": "entity", "name": "Empty", "entityType": "thing", "observations": []},
    ]
    path = tmp_path / "odd.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n", encoding="utf-8")  # + a blank line
    summary = run_import("mcp-memory", path, board)
    problems = {p.where: p.reason for p in summary.problems}
    assert set(problems) == {"line 1", "line 4", "line 5", "line 6", "line 7"}
    assert "surrogate" in problems["line 1"]
    assert "'Nobody'" in problems["line 4"]
    assert "relation type" in problems["line 5"]
    assert "unknown type" in problems["line 6"]
    contents = sorted(m.content for m in list_memories(board)[0])
    assert contents == ["Empty (thing)", "Kafka (service)\n\n- Holds the events\n- Runs 3 brokers"]


def test_a_missing_file_is_refused(tmp_path, board):
    with pytest.raises(SourceUnreadable):
        run_import("mcp-memory", tmp_path / "none.jsonl", board)
    out = run_cli(
        "import", "--from", "mcp-memory", str(tmp_path), "--board", str(board), env_home=tmp_path / "h"
    )
    assert out.returncode == 2 and "cannot read" in out.stderr
    assert not board.exists()


def test_the_command_line(tmp_path, board):
    source = graph(tmp_path)
    out = run_cli(
        "import", "--from", "mcp-memory", str(source), "--board", str(board), env_home=tmp_path / "h"
    )
    assert out.returncode == 1, out.stderr
    assert "line 3: not valid JSON (skipped)" in out.stderr
    assert "line 8: not valid JSON (truncated" in out.stderr
    assert "3 new, 0 already on the board" in out.stdout
    (tmp_path / "c").mkdir()
    clean = graph(tmp_path / "c", bad_middle=False, truncated_tail=False)
    again = run_cli(
        "import", "--from", "mcp-memory", str(clean), "--board", str(board), "--json", env_home=tmp_path / "h"
    )
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["memories"] == {"new": 0, "existing": 3, "duplicate": 0}
    assert report["relations"] == {"new": 0, "existing": 3} and report["skipped"] == []
