"""Shim benchmarks against a real daemon (not a test): start-up, RSS, relay overhead, recovery after kill -9.

    .venv/bin/python bench/bench_shim.py [--runs 40] [--calls 300] [--restarts 5] [--json]

Measures, with ``memoryd serve --model none`` on an empty temporary board and the test-only diagnostics
tools (``MEMORYD_TEST_TOOLS=1``):

* spawn -> first answered ``initialize``: wall time from starting the ``memoryd-shim`` console script to
  reading the answer on its stdout (p50/p95; target <= 50 ms); also ``python -c pass`` on the same machine
  as the floor no Python program beats;
* shim RSS while connected (target <= 20 MB);
* relay overhead: a ``tools/call diag_echo`` round trip through the shim minus the same call on a direct
  socket connection, the two alternating call by call (median of the paired differences; target <= 1 ms);
* kill -9 of the daemon -> next successful call through the same live shim, which starts a new daemon
  (p50/p95).

The shim's bytecode is compiled first (``compileall``): an installed package has its ``.pyc`` files,
and ``PYTHONDONTWRITEBYTECODE`` would otherwise make every run recompile the shim.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from support.briefs import Shim
from support.daemon import INIT, INITIALIZED, REPO, DaemonProcess, short_tmpdir
from support.measure import rss_mb
from support.sockets import RawConnection


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(values: list[float]) -> dict:
    return {"n": len(values), "p50": statistics.median(values), "p95": pct(values, 0.95), "min": min(values)}


class World:
    """A temporary MEMORYD_HOME, board and socket; finds and kills every daemon started in it."""

    def __init__(self) -> None:
        self.root = short_tmpdir()
        self.socket = self.root / "d.sock"
        (self.root / "board").mkdir()
        self.env = dict(
            os.environ,
            MEMORYD_HOME=str(self.root / "home"),
            MEMORYD_BOARD=str(self.root / "board"),
            MEMORYD_MODEL="none",
            MEMORYD_TEST_TOOLS="1",
            MEMORYD_LOG_LEVEL="warning",
        )
        self.env.pop("MEMORYD_SOCKET", None)
        self.first: DaemonProcess | None = None

    def start_daemon(self) -> None:
        """``memoryd serve`` as the shim would start it (the board's own index, no model), until it answers."""
        self.first = DaemonProcess(self.root, socket_path=self.socket, index="", env=self.env).start()

    def daemons(self) -> list[int]:
        marker = f"MEMORYD_HOME={self.env['MEMORYD_HOME']}\0".encode()
        pids = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError):
                    stat = Path("/proc", entry, "stat").read_text().rsplit(")", 1)[1].split()[0]
                    cmd = Path("/proc", entry, "cmdline").read_bytes()
                    if (
                        stat != "Z"
                        and b"serve" in cmd
                        and marker in Path("/proc", entry, "environ").read_bytes()
                    ):
                        pids.append(int(entry))
        return pids

    def close(self) -> None:
        for pid in self.daemons():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self.first is not None:
            self.first.kill()  # reaps it (it may be dead already) and closes its log
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def direct_session(path: Path):
    """A raw socket session with hello + initialize done."""
    with RawConnection(path, timeout=30) as conn:
        conn.send(INIT)
        conn.recv()
        conn.send(INITIALIZED)
        yield conn


def cpu_ms(proc: subprocess.Popen) -> float:
    """Reap ``proc`` and return its user + system CPU time: unlike wall time, barely moved by machine load."""
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    return (usage.ru_utime + usage.ru_stime) * 1000


def bench_startup(world: World, runs: int) -> tuple[dict, dict, dict, dict, dict]:
    floor, floor_cpu, startup, startup_cpu, rss = [], [], [], [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", "pass"])
        floor_cpu.append(cpu_ms(proc))
        floor.append((time.perf_counter() - t0) * 1000)
    for _ in range(runs):
        t0 = time.perf_counter()
        shim = Shim(world.socket, world.env, pump=False)
        shim.send(INIT)
        answer = shim.recv()
        startup.append((time.perf_counter() - t0) * 1000)
        assert "result" in answer, str(answer)[:300]
        rss.append(rss_mb(shim.pid))
        shim.proc.stdin.close()
        startup_cpu.append(cpu_ms(shim.proc))
        shim.proc.stdout.close()
    return summary(startup), summary(floor), summary(rss), summary(startup_cpu), summary(floor_cpu)


def bench_relay(world: World, calls: int) -> dict:
    """diag_echo round trips on a direct socket session and through a shim, alternating call by call (so both
    see the same machine load); ``added_p50`` is the median of the per-pair differences."""
    request = {
        "jsonrpc": "2.0",
        "method": "tools/call",
        "params": {"name": "diag_echo", "arguments": {"value": "x" * 200}},
    }
    direct, relayed = [], []
    shim = Shim(world.socket, world.env, pump=False).initialize(INIT["params"]["protocolVersion"])
    try:
        with direct_session(world.socket) as conn:

            def via_direct(n: int) -> None:
                conn.send({**request, "id": n})
                conn.recv()

            def via_shim(n: int) -> None:
                shim.send({**request, "id": n})
                shim.recv()

            for n in range(calls + 20):  # the first 20 pairs warm up
                pair = (via_direct, via_shim) if n % 2 else (via_shim, via_direct)
                for call in pair:
                    t0 = time.perf_counter()
                    call(n)
                    if n >= 20:
                        (direct if call is via_direct else relayed).append((time.perf_counter() - t0) * 1000)
    finally:
        shim.close()
    return {
        "direct_p50": statistics.median(direct),
        "shim_p50": statistics.median(relayed),
        "added_p50": statistics.median(r - d for r, d in zip(relayed, direct, strict=True)),
        "shim_p95": pct(relayed, 0.95),
    }


def bench_restarts(world: World, restarts: int) -> dict:
    shim = Shim(world.socket, world.env, start=True, pump=False)
    shim.initialize(INIT["params"]["protocolVersion"])
    times = []
    try:
        for n in range(restarts):
            [pid] = world.daemons()
            t0 = time.perf_counter()
            os.kill(pid, signal.SIGKILL)
            while True:  # retry "memoryd restarted" / not-yet-up errors until a call succeeds
                call = {"jsonrpc": "2.0", "id": f"r{n}-{time.perf_counter()}", "method": "tools/call"}
                call["params"] = {"name": "diag_echo", "arguments": {"value": n}}
                shim.send(call)
                if "result" in shim.recv():
                    break
                time.sleep(0.01)
            times.append((time.perf_counter() - t0) * 1000)
    finally:
        shim.close()
    return summary(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="shim start-ups to time")
    parser.add_argument("--calls", type=int, default=300, help="calls for the relay overhead")
    parser.add_argument("--restarts", type=int, default=5, help="kill -9 recoveries to time (0 to skip)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    compileall.compile_dir(str(REPO / "shim" / "memoryd_shim"), quiet=1)
    world = World()
    try:
        world.start_daemon()
        startup, floor, rss, startup_cpu, floor_cpu = bench_startup(world, args.runs)
        relay = bench_relay(world, args.calls)
        restarts = bench_restarts(world, args.restarts) if args.restarts else None
    finally:
        world.close()
    result = {
        "spawn_to_initialize_ms": startup,
        "python_floor_ms": floor,
        "shim_cpu_ms": startup_cpu,
        "python_floor_cpu_ms": floor_cpu,
        "shim_rss_mb": rss,
        "relay_ms": relay,
        "kill9_to_next_call_ms": restarts,
        "load_average": os.getloadavg(),
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print(
        f"spawn -> initialize answered   p50 {startup['p50']:6.1f} ms   p95 {startup['p95']:6.1f} ms   (target <= 50 ms)"
    )
    print(f"python -c pass (the floor)     p50 {floor['p50']:6.1f} ms   p95 {floor['p95']:6.1f} ms")
    print(
        f"CPU time (user+sys)            shim p50 {startup_cpu['p50']:6.1f} ms   python -c pass p50 "
        f"{floor_cpu['p50']:6.1f} ms   (barely moved by load)"
    )
    print(
        f"shim RSS while connected       p50 {rss['p50']:6.1f} MB   max {max(rss['p50'], rss['p95']):6.1f} MB   (target <= 20 MB)"
    )
    print(
        f"diag_echo round trip           direct p50 {relay['direct_p50']:.3f} ms   through shim p50 "
        f"{relay['shim_p50']:.3f} ms   added {relay['added_p50']:.3f} ms   (target <= 1 ms)"
    )
    if restarts:
        print(f"kill -9 -> next call succeeds  p50 {restarts['p50']:6.0f} ms   p95 {restarts['p95']:6.0f} ms")
    print(f"load average {result['load_average']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
