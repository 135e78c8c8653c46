"""Imported memories through the running daemon: files written by ``memoryd import`` are indexed by the
daemon (at start, and by its watcher while it runs) and found with ``search_memories`` and ``recall`` through
the real ``memoryd-shim --tools memories``. The import itself never talks to the index."""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from memoryd.importers.mcp_memory import render
from memoryd.kinds.memories.files import content_hash
from support.daemon import REPO, DaemonProcess, short_tmpdir
from support.importers import GRAPH_ENTITIES, make_memdb, run_cli, write_graph

SHIM = REPO / ".venv" / "bin" / "memoryd-shim"
POLL_S = 20.0  # a bound that catches a file never indexed, not a speed target (that is in bench/)


class MemoryShim:
    """``memoryd-shim --tools memories --no-start``, spoken to in raw JSON-RPC lines."""

    def __init__(self, socket_path: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [str(SHIM), "--socket", str(socket_path), "--tools", "memories", "--no-start"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd="/",
        )
        self._lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self._id = 0
        params = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        }
        assert "result" in self.request("initialize", params)
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self._lines.put(line)

    def _send(self, message: dict) -> None:
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict) -> dict:
        self._id += 1
        self._send({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})
        while True:
            answer = json.loads(self._lines.get(timeout=30))
            if answer.get("id") == self._id:
                return answer

    def tool(self, name: str, **arguments: Any) -> Any:
        """The ``result`` of a successful memory tool answer (``{"ok": true, "result": ...}``)."""
        answer = self.request("tools/call", {"name": name, "arguments": arguments})
        result = answer["result"]
        assert result.get("isError") is False, result
        body = result.get("structuredContent") or json.loads(result["content"][0]["text"])
        assert body["ok"] is True, body
        return body["result"]

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def memories_of(result: Any) -> list[dict]:
    """The memories of a search/recall result (a list, or an object holding ``memories``)."""
    return result if isinstance(result, list) else result["memories"]


def poll_search(shim: MemoryShim, query: str, wanted: str) -> list[dict]:
    deadline = time.monotonic() + POLL_S
    while True:
        found = memories_of(shim.tool("search_memories", query=query))
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
        shim = MemoryShim(daemon.socket, daemon.env)
        try:
            # imported before the daemon started: indexed at its start
            quokka = content_hash("Zanzibar quokka: the staging database password rotates monthly")
            found = poll_search(shim, "zanzibar quokka", quokka)
            hit = next(m for m in found if m["hash"] == quokka)
            assert hit["importance"] == 9 and hit["memory_type"] == "fact"
            deploy = content_hash("Deploys go through the blue/green switch on the load balancer")
            recalled = shim.tool("recall", query="blue/green switch load balancer", depth=2)
            hashes = {m["hash"] for m in memories_of(recalled)}
            assert deploy in hashes
            assert {content_hash(MEMDB_CI), content_hash(MEMDB_FLAKY)} <= hashes  # its edges, followed
            stats_before = shim.tool("memory_stats")

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
            edges = shim.tool("get_relationships", hash=john, direction="outgoing")
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
            stats = shim.tool("memory_stats")
            assert stats["memoryCount"] == stats_before["memoryCount"] + len(GRAPH_ENTITIES)
        finally:
            shim.close()
    finally:
        daemon.kill()


MEMDB_CI = "The CI cache key includes the lockfile hash"
MEMDB_FLAKY = "Flaky test: the payment webhook mock needs a fixed clock"
