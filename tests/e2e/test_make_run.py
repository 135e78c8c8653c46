"""``make run`` as a person types it: one plain line once the daemon is ready, naming the board, the socket
and how to connect agents; a clean stop on Ctrl-C (SIGINT to the terminal's process group). The real
Makefile, the real daemon, a temporary home."""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import threading

import pytest

from support.daemon import REPO, short_tmpdir

#: Catches a line that never comes; not a speed assertion.
READY_BOUND_S = 120.0


def _make_is_set_up() -> bool:
    if shutil.which("make") is None:
        return False
    question = subprocess.run(["make", "-q", ".venv/.memoryd-installed"], cwd=REPO, capture_output=True)
    return question.returncode == 0


pytestmark = pytest.mark.skipif(
    not _make_is_set_up(), reason="needs make and a set-up .venv (make setup), so make run starts at once"
)


def _lines(stream, into: queue.Queue) -> None:
    for line in stream:
        into.put(line)
    into.put(None)


def _human(lines: list[str]) -> list[str]:
    """Lines that are neither the daemon's JSON log nor make's own report of the Ctrl-C."""
    return [ln for ln in lines if ln.strip() and not ln.startswith(("{", "make: "))]


def test_make_run_prints_one_line_when_ready_and_stops_cleanly():
    root = short_tmpdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORYD_", "MAKE", "MFLAGS"))}
    env.update(HOME=str(root / "home"), MEMORYD_HOME=str(root / "mh"), MEMORYD_MODEL="none")
    venv_bin = str(REPO / ".venv" / "bin")
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "/usr/bin:/bin").split(os.pathsep) if p != venv_bin
    )
    proc = subprocess.Popen(
        ["make", "run"],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # make and the daemon in one process group, stopped together below
    )
    err: queue.Queue = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stderr, err), daemon=True).start()
    seen: list[str] = []
    try:
        while not (seen and seen[-1].startswith("memoryd ready:")):
            line = err.get(timeout=READY_BOUND_S)
            assert line is not None, f"make run ended before it was ready: {''.join(seen)}"
            seen.append(line)
        ready = seen[-1].rstrip("\n")
        socket_path = root / "mh" / "state" / "memoryd.sock"
        board = root / "mh" / "data" / "board"
        assert ready == (
            f"memoryd ready: board {board}, socket {socket_path}; "
            f"connect your agents with: {REPO / '.venv' / 'bin' / 'memoryd'} connect"
        )
        assert socket_path.exists() and board.is_dir()
        # the connect command it names works as printed (here: its --print, which writes nothing)
        printed = subprocess.run(
            [*ready.rsplit(": ", 1)[1].split(), "--print"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert printed.returncode == 0 and "memoryd_shim" in printed.stdout, printed.stderr
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
        out = proc.stdout.read()
        proc.wait(60)
        while (line := err.get(timeout=READY_BOUND_S)) is not None:
            seen.append(line)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        shutil.rmtree(root, ignore_errors=True)
    assert out == ""  # make echoes no command; the daemon never writes stdout
    assert _human(seen) == [ready + "\n"], seen
    assert not socket_path.exists()
