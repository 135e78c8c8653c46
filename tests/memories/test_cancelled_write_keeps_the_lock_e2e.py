"""A memory write whose call is cancelled (the client's notifications/cancelled, the call's deadline, an agent
gone) still runs to its end on the board, and no other write starts before it has ended (real daemon, real
shim, real files).

The board work runs in a worker thread that a cancellation cannot stop. When the memories' write lock was let
go as soon as the call was cancelled, a second update of the same memory ran beside the first one: the memory
became two ("... one" and "... two"), and the edges pointing at it were split between them.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from memoryd.kinds.memories.files import write_memory
from memoryd.kinds.memories.format import Memory, Relation, content_hash, relation_id
from support.daemon import DaemonProcess, short_tmpdir
from support.memories import MemShim, poll, wait_engine_ready

HUB = "The hub memory every spoke points at"
SPOKES = 300  # enough edges that moving them takes a while, so the second update comes meanwhile


def plant(board: Path) -> str:
    """A hub memory and SPOKES memories with an edge to it, written before the daemon starts; the hub's id."""
    hub = Memory.new(HUB, tags=("hub",))
    write_memory(board, hub)
    for n in range(SPOKES):
        edge = Relation(relation_id(), "related_to", hub.id, hub.created_at)
        write_memory(board, Memory.new(f"Spoke {n} leans on the hub", relations=(edge,)))
    return hub.id


def memory_files(board: Path) -> dict[str, str]:
    """Each memory file's content (after its front matter), by file name."""
    return {p.name: p.read_text().split("\n---\n", 1)[1].strip() for p in (board / "memories").glob("*.md")}


def test_a_cancelled_update_holds_the_lock_until_its_board_work_ends():
    root = short_tmpdir()
    board = root / "board"
    board.mkdir()
    hub = plant(board)
    # a slow disk may take seconds over the moves: no call may time out here
    daemon = DaemonProcess(root, board=board, env={"MEMORYD_TOOL_TIMEOUT_MS": "120000"})
    try:
        daemon.start()
        wait_engine_ready(daemon)
        first = MemShim(daemon.socket, daemon.env).initialize()
        second = MemShim(daemon.socket, daemon.env).initialize()
        assert first.ok("memory_stats")["relationshipCount"] == SPOKES
        first.send({
            "jsonrpc": "2.0", "id": "move", "method": "tools/call",
            "params": {"name": "update_memory", "arguments": {"hash": hub, "content": HUB + " one"}},
        })  # fmt: skip
        # once the moved hub is on the board its edges are being moved: cancel the call then
        moved = board / "memories" / f"{content_hash(HUB + ' one')}.md"
        deadline = time.monotonic() + 60
        while not moved.exists():
            assert time.monotonic() < deadline, "the first update never wrote the moved hub"
            time.sleep(0.001)
        first.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "move"}})
        # the same memory changed again by another agent: it waits for the first move to end, then finds
        # no memory of that hash
        error = second.err("update_memory", hash=hub, content=HUB + " two")
        assert error["code"] == "E_NOT_FOUND", error

        # the cancelled call never indexed its files: the watcher does, a moment later (the hub's move
        # first, the spokes' retargeted edges file by file after it)
        def settled() -> bool:
            now = second.ok("memory_stats")
            return (now["memoryCount"], now["relationshipCount"]) == (SPOKES + 1, SPOKES)

        poll(settled, "the old hub gone from the index and every edge on the moved hub")
        stats = second.ok("memory_stats")
        first.close()
        second.close()
    finally:
        daemon.kill()
    files = memory_files(board)
    hubs = sorted(text for text in files.values() if text.startswith(HUB))
    assert hubs == [HUB + " one"], hubs
    targets = {line.split("target:")[1].strip() for p in (board / "memories").glob("*.md")
               for line in p.read_text().splitlines() if "target:" in line}  # fmt: skip
    assert targets == {content_hash(HUB + " one")}, targets
    assert (stats["memoryCount"], stats["relationshipCount"]) == (SPOKES + 1, SPOKES), stats
    shutil.rmtree(root, ignore_errors=True)
