"""Which memoryd modules two flows cross: a ``search_briefs`` call and an editor's save of a ``said.txt``.

    .venv/bin/python bench/flow_modules.py [--board DIR] [--json] [--functions]

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

Prints each flow as the ordered list of modules and their count, with the first function run in each
(``--functions``: every function of it that ran, in order: what the flow needs the module for). Not part of ``make bench``: it measures
structure, not speed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from _util import BOARD_V1, daemon
from support.briefs import Shim
from support.daemon import PYTHON, DaemonProcess
from support.measure import hybrid_ready

#: Runs as ``python -c`` with the serve command's arguments: installs the hook, then the CLI.
BOOT = r"""
import json, os, signal, sys, threading

order, seen, on = [], set(), [False]
funcs = {}  # module -> the names of its functions that ran, in order (for --functions)
HEARTBEAT = {"_run", "_check_health", "_healthy", "alive", "_take_due", "_due_at"}


def hook(frame, event, arg):
    if not on[0] or event != "call":
        return
    name = frame.f_globals.get("__name__") or ""
    if not name.startswith("memoryd"):
        return
    if name == "memoryd.core.watch" and (
        frame.f_code.co_name in HEARTBEAT or (frame.f_back and frame.f_back.f_code.co_name in HEARTBEAT)
    ):
        return
    ran = funcs.setdefault(name, [])
    if frame.f_code.co_name not in ran:
        ran.append(frame.f_code.co_name)
    if name in seen:
        return
    seen.add(name)
    order.append([name, threading.current_thread().name, frame.f_code.co_name])


def start(*_):
    order.clear()
    seen.clear()
    funcs.clear()
    on[0] = True


def stop(*_):
    on[0] = False
    with open(os.environ["MEMORYD_FLOW_OUT"], "w") as f:
        json.dump([[m, t, f, funcs.get(m, [])] for m, t, f in order], f)


sys.setprofile(hook)
threading.setprofile(hook)
signal.signal(signal.SIGUSR1, start)
signal.signal(signal.SIGUSR2, stop)
from memoryd.cli.main import main

sys.exit(main(sys.argv[1:]))
"""


class ProfiledDaemon(DaemonProcess):
    """``memoryd serve`` started through :data:`BOOT` (the module recorder) instead of ``-m memoryd``."""

    @property
    def argv(self) -> list[str]:
        python, _, _, *rest = super().argv
        return [python, "-c", BOOT, *rest]


def quiet(d: ProfiledDaemon, timeout: float = 300.0) -> None:
    """Wait until the backfill after the model got warm is over and the index maintenance after it ran."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = d.log()
        done = log.rfind('"index_backfilled"')
        if done >= 0 and '"index_optimized"' in log[done:]:
            time.sleep(1.0)
            return
        time.sleep(0.5)
    raise RuntimeError(f"the daemon did not settle within {timeout:.0f} s:\n{d.log()[-4000:]}")


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
    shim = Shim(socket, command=[PYTHON, "-m", "memoryd_shim"], pump=False).initialize("2025-06-18")
    try:
        shim.request(
            "tools/call", {"name": "search_briefs", "arguments": {"query": "login page keeps redirecting"}}
        )
    finally:
        time.sleep(0.05)
        shim.proc.kill()  # after SIGUSR2 would be cleaner, but the answer is already read: see recorded()
        shim.proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--board", type=Path, default=BOARD_V1)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--functions", action="store_true", help="also list every function of a module that ran")
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
        with daemon(board, work / "index", env=env, kind=ProfiledDaemon) as d:
            d.wait_until(hybrid_ready)
            quiet(d)
            flows["search_briefs"] = recorded(d, out, lambda: search_call(d.socket))
            said = sorted(board.glob("briefs/*/said.txt"))[0]
            flows["save"] = recorded(
                d, out, lambda: (said.write_text(said.read_text() + "\nand on mobile too\n"), time.sleep(3.0))
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps({k: [m for m, *_ in v] for k, v in flows.items()}, indent=1))
        return 0
    for name, entries in flows.items():
        short = [m.removeprefix("memoryd.").replace(".", "/") for m, *_ in entries]
        print(f"{name}: {len(short)} modules")
        for (_m, thread, func, ran), s in zip(entries, short, strict=True):
            print(f"  {s:32} {func:28} [{thread}]")
            if args.functions:
                print(f"      {', '.join(ran)}")
        print("  " + " -> ".join(f"`{s}`" for s in short))
    return 0


if __name__ == "__main__":
    sys.exit(main())
