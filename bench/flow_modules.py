"""Which memoryd modules two flows cross: a ``search_briefs`` call and an editor's save of a ``said.txt``.

    .venv/bin/python bench/flow_modules.py [--board DIR] [--json]

A real ``memoryd serve`` runs on a copy of the board (default: board-v1) with a profile hook installed
before anything is imported (``sys.setprofile`` and ``threading.setprofile``, so every thread the daemon
starts is seen). SIGUSR1 starts recording and SIGUSR2 stops it: between the two, the hook records each
``memoryd``/``memoryd_shim`` module the first time one of its functions runs, in that order, with the
thread it ran on. The watcher's heartbeat (its timer thread checking the observer about once a second) is
left out; the daemon is idle (model warm, backfill and index maintenance over) before each flow starts.

* search: SIGUSR1, then a real ``memoryd-shim`` connects, initializes and calls ``search_briefs``; SIGUSR2
  as soon as the answer is read (the shim's disconnect is not part of the flow).
* save: SIGUSR1, then one brief's ``said.txt`` is rewritten in place; SIGUSR2 after the debounce and the
  write (3 s; index maintenance is 30 s away).

Prints each flow as the ordered list of modules and their count. Not part of ``make bench``: it measures
structure, not speed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _daemon import Daemon, hybrid_ready
from _util import BOARD_V1, VENV_BIN

#: Runs as ``python -c`` with the serve command's arguments: installs the hook, then the CLI.
BOOT = r"""
import json, os, signal, sys, threading

order, seen, on = [], set(), [False]
HEARTBEAT = {"_run", "_check_health", "_healthy", "alive", "_take_due", "_due_at"}


def hook(frame, event, arg):
    if not on[0] or event != "call":
        return
    name = frame.f_globals.get("__name__") or ""
    if not name.startswith("memoryd") or name in seen:
        return
    if name == "memoryd.core.watch" and (
        frame.f_code.co_name in HEARTBEAT or (frame.f_back and frame.f_back.f_code.co_name in HEARTBEAT)
    ):
        return
    seen.add(name)
    order.append([name, threading.current_thread().name, frame.f_code.co_name])


def start(*_):
    order.clear()
    seen.clear()
    on[0] = True


def stop(*_):
    on[0] = False
    with open(os.environ["MEMORYD_FLOW_OUT"], "w") as f:
        json.dump(order, f)


sys.setprofile(hook)
threading.setprofile(hook)
signal.signal(signal.SIGUSR1, start)
signal.signal(signal.SIGUSR2, stop)
from memoryd.cli.main import main

sys.exit(main(sys.argv[1:]))
"""


class ProfiledDaemon(Daemon):
    def start(self) -> ProfiledDaemon:
        argv = [str(VENV_BIN / "python"), "-c", BOOT, "serve", "--board", str(self.board)]
        argv += ["--index", str(self.index), "--socket", str(self.socket)]
        self._log = open(self.log_path, "wb")  # noqa: SIM115 -- closed in stop()
        self.started_at = time.perf_counter()
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log, env=self.env, cwd="/"
        )
        return self


def quiet(d: ProfiledDaemon, timeout: float = 300.0) -> None:
    """Wait until the backfill after the model got warm is over and the index maintenance after it ran."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = d.log_tail(1 << 22)
        done = log.rfind('"index_backfilled"')
        if done >= 0 and '"index_optimized"' in log[done:]:
            time.sleep(1.0)
            return
        time.sleep(0.5)
    raise RuntimeError(f"the daemon did not settle within {timeout:.0f} s:\n{d.log_tail()}")


def recorded(d: ProfiledDaemon, out: Path, run) -> list[list[str]]:
    out.unlink(missing_ok=True)
    os.kill(d.pid, signal.SIGUSR1)
    time.sleep(0.2)  # the handler runs between bytecodes of the daemon's main thread
    run()
    os.kill(d.pid, signal.SIGUSR2)
    deadline = time.monotonic() + 10
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.1)
    return json.loads(out.read_text())


def search_call(socket: Path) -> None:
    shim = subprocess.Popen(
        [str(VENV_BIN / "python"), "-m", "memoryd_shim", "--socket", str(socket), "--no-start"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert shim.stdin is not None and shim.stdout is not None
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "flow", "version": "1"},
    }
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "search_briefs", "arguments": {"query": "login page keeps redirecting"}},
        },
    ]
    try:
        for msg in lines:
            shim.stdin.write(json.dumps(msg) + "\n")
            shim.stdin.flush()
        while True:
            line = shim.stdout.readline()
            if not line:
                raise RuntimeError("the shim closed before answering")
            if json.loads(line).get("id") == 2:
                return
    finally:
        time.sleep(0.05)
        shim.kill()  # after SIGUSR2 would be cleaner, but the answer is already read: see recorded()
        shim.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--board", type=Path, default=BOARD_V1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(dir="/tmp", prefix="md-flow-"))
    board = work / "board"
    shutil.copytree(args.board, board)
    out = work / "flow.json"
    env = {"MEMORYD_FLOW_OUT": str(out), "MEMORYD_OPTIMIZE_INTERVAL_S": "30"}
    if "MEMORYD_MODELS" in os.environ:
        env["MEMORYD_MODELS"] = os.environ["MEMORYD_MODELS"]
    flows: dict[str, list[list[str]]] = {}
    try:
        with ProfiledDaemon(board, work / "index", env=env) as d:
            d.wait(hybrid_ready)
            quiet(d)
            flows["search_briefs"] = recorded(d, out, lambda: search_call(d.socket))
            said = sorted(board.glob("briefs/*/said.txt"))[0]
            flows["save"] = recorded(
                d, out, lambda: (said.write_text(said.read_text() + "\nand on mobile too\n"), time.sleep(3.0))
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps({k: [m for m, _, _ in v] for k, v in flows.items()}, indent=1))
        return 0
    for name, entries in flows.items():
        short = [m.removeprefix("memoryd.").replace(".", "/") for m, _, _ in entries]
        print(f"{name}: {len(short)} modules")
        for (_m, thread, func), s in zip(entries, short, strict=True):
            print(f"  {s:32} {func:28} [{thread}]")
        print("  " + " -> ".join(f"`{s}`" for s in short))
    return 0


if __name__ == "__main__":
    sys.exit(main())
