"""A writer killed mid-write leaves temp files; the next daemon start removes those that are its own.

The writer is a real process writing through :mod:`memoryd.board.atomic` (the code every board write
uses), stopped with SIGKILL while its temp files exist and before their rename; then a real daemon starts
on that board. Files that are not provably ours and stale stay, byte for byte.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import time

from support.briefs import wait_engine_ready
from support.daemon import PYTHON, short_tmpdir

BRIEF = "b-20260105-a1b2c3"
CONTENT = "killed before the rename"
HASH = hashlib.sha256(CONTENT.encode()).hexdigest()

# Opens each folder through the gate like the writers do, creates the temp file of a real write of a
# memory, a session summary, an outcome and an export, reports the names, then waits to be killed.
WRITER = f"""
import contextlib, sys, time
from pathlib import Path
from memoryd.board import atomic
from memoryd.board.gate import open_dir, open_root
board, exports = Path(sys.argv[1]), Path(sys.argv[2])
with contextlib.ExitStack() as stack:
    names = []
    for folder, target in (("memories", "{HASH}.md"), ("sessions", "s1.summary.json"),
                           ("briefs/{BRIEF}", "outcome.md")):
        d = stack.enter_context(open_dir(board, folder))
        names.append(folder + "/" + stack.enter_context(atomic.temp_file(d, target, b"x" * 4096)))
    d = stack.enter_context(open_root(exports))
    names.append(stack.enter_context(atomic.temp_file(d, "memoryd-export-1.jsonl", b"{{}}")))
    print(" ".join(names), flush=True)
    time.sleep(600)
"""


def kill_a_writer_mid_write(board, exports) -> tuple[list[str], int]:
    """The temp names a SIGKILLed writer left, and its (now dead) pid."""
    writer = subprocess.Popen(
        [PYTHON, "-c", WRITER, str(board), str(exports)], stdout=subprocess.PIPE, text=True, cwd="/"
    )
    try:
        names = writer.stdout.readline().split()
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(30)
        writer.stdout.close()
    assert len(names) == 4, names
    return names, writer.pid


def test_a_start_removes_the_temp_files_a_killed_writer_left_and_nothing_else(make_daemon):
    root = short_tmpdir()
    daemon = make_daemon(root)
    board, exports = daemon.board, root / "home" / "data" / "exports"
    for folder in ("memories", "sessions", f"briefs/{BRIEF}", "tasks"):
        (board / folder).mkdir(parents=True)
    exports.mkdir(parents=True)
    left, dead = kill_a_writer_mid_write(board, exports)
    killed = [board / n for n in left[:3]] + [exports / left[3]]
    assert all(p.is_file() for p in killed), "the killed writer left its temp files"

    mem = board / "memories"
    old = time.time() - 2 * 3600
    legacy_old = mem / f".{HASH}.md.0123456789ab.tmp"  # the form without a pid, from an hour ago
    stale = [*killed, legacy_old]
    kept = {
        mem / f".{HASH}.md.abcdefabcdef.tmp": "no pid, written just now (a live older writer)",
        mem / f".{HASH}.md.{os.getpid()}-0123456789ab.tmp": "its writer is alive",
        mem / f".{HASH}.md.tmp": "not our temp form",
        mem / "notes.md.tmp": "a user's file",
        mem / f".notes.md.{dead}-0123456789ab.tmp": "memoryd writes no notes.md in memories/",
        board / "tasks" / f".notes.json.{dead}-0123456789ab.tmp": "not a task's file",
        board / "briefs" / BRIEF / f".screen.txt.{dead}-0123456789ab.tmp": "memoryd writes no screen.txt",
    }
    task_temp = board / "tasks" / f".t-20260105-a1b2c3.json.{dead}-0123456789ab.tmp"  # a new task's link
    said_temp = board / "briefs" / BRIEF / f".said.txt.{dead}-0123456789ab.tmp"  # `memoryd import` writes it
    stale += [task_temp, said_temp]
    for path in [legacy_old, task_temp, said_temp, *kept]:
        path.write_text("not removed")
    os.utime(legacy_old, (old, old))
    link = mem / f".{HASH}.md.{dead}-fedcba987654.tmp"
    link.symlink_to(board / "memories" / "notes.md.tmp")  # our name, but a symlink: never ours

    daemon.start()
    wait_engine_ready(daemon)
    assert [str(p) for p in stale if p.exists() or p.is_symlink()] == []
    assert {str(p): p.read_text() for p in kept} == {str(p): "not removed" for p in kept}, kept
    assert link.is_symlink()
    assert '"stale_temps_removed"' in daemon.log()
