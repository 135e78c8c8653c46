"""Imported memories through the running daemon: files written by ``memoryd import`` are indexed by the
daemon (at start, and by its watcher while it runs) and found with ``search_memories`` and ``recall`` through
the real ``memoryd-shim --tools memories``. The import itself never talks to the index."""

from __future__ import annotations

import json
import shutil
import time
from typing import Any

import pytest

from memoryd.importers.mcp_memory import render
from memoryd.kinds.memories.files import content_hash
from support.daemon import DaemonProcess, short_tmpdir
from support.importers import GRAPH_ENTITIES, make_memdb, run_cli, write_graph
from support.memories import MemShim

POLL_S = 20.0  # a bound that catches a file never indexed, not a speed target (that is in bench/)


def memories_of(result: Any) -> list[dict]:
    """The memories of a search/recall result (a list, or an object holding ``memories``)."""
    return result if isinstance(result, list) else result["memories"]


def poll_search(shim: MemShim, query: str, wanted: str) -> list[dict]:
    deadline = time.monotonic() + POLL_S
    while True:
        found = memories_of(shim.ok("search_memories", query=query))
        if any(m["hash"] == wanted for m in found):
            return found
        assert time.monotonic() < deadline, (
            f"{wanted[:12]} not found for {query!r} within {POLL_S} s: {found}"
        )
        time.sleep(0.1)


@pytest.fixture
def root():
    path = short_tmpdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_imported_memories_are_searchable_through_the_daemon(root, tmp_path):
    board = root / "board"
    source = make_memdb(tmp_path / "shopfront" / ".memdb" / "memory.db")
    out = run_cli("import", "--from", "memdb", str(source), "--board", str(board), env_home=tmp_path / "h")
    assert out.returncode == 0, out.stderr
    daemon = DaemonProcess(root, board=board)
    try:
        daemon.start()
        shim = MemShim(daemon.socket, daemon.env).initialize()
        try:
            # imported before the daemon started: indexed at its start
            quokka = content_hash("Zanzibar quokka: the staging database password rotates monthly")
            found = poll_search(shim, "zanzibar quokka", quokka)
            hit = next(m for m in found if m["hash"] == quokka)
            assert hit["importance"] == 9 and hit["memory_type"] == "fact"
            deploy = content_hash("Deploys go through the blue/green switch on the load balancer")
            recalled = shim.ok("recall", query="blue/green switch load balancer", depth=2)
            hashes = {m["hash"] for m in memories_of(recalled)}
            assert deploy in hashes
            assert {content_hash(MEMDB_CI), content_hash(MEMDB_FLAKY)} <= hashes  # its edges, followed
            stats_before = shim.ok("memory_stats")

            # imported while the daemon runs: its watcher indexes the new files
            graph = write_graph(tmp_path / "memory.jsonl")
            out = run_cli(
                "import", "--from", "mcp-memory", str(graph), "--board", str(board), env_home=tmp_path / "h"
            )
            assert out.returncode == 1 and "line 3" in out.stderr  # the bad lines are reported
            name, etype, obs = GRAPH_ENTITIES[0]
            john = content_hash(render(name, etype, obs))
            poll_search(shim, "speaks fluent Spanish", john)
            billing = content_hash(render(*GRAPH_ENTITIES[1]))
            edges = shim.ok("get_relationships", hash=john, direction="outgoing")
            edge_list = edges if isinstance(edges, list) else edges["relationships"]
            assert any(e["to_hash"] == billing and e["relation_type"] == "maintains" for e in edge_list)

            # importing both again adds nothing
            for kind, path in (("memdb", source), ("mcp-memory", graph)):
                again = run_cli(
                    "import",
                    "--from",
                    kind,
                    str(path),
                    "--board",
                    str(board),
                    "--json",
                    env_home=tmp_path / "h",
                )
                report = json.loads(again.stdout)
                assert report["memories"]["new"] == 0 and report["relations"]["new"] == 0, report
            time.sleep(1.0)  # a watcher event, had any file changed, lands well within this
            stats = shim.ok("memory_stats")
            assert stats["memoryCount"] == stats_before["memoryCount"] + len(GRAPH_ENTITIES)
        finally:
            shim.close()
    finally:
        daemon.kill()


MEMDB_CI = "The CI cache key includes the lockfile hash"
MEMDB_FLAKY = "Flaky test: the payment webhook mock needs a fixed clock"
