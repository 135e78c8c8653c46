"""The daemon's RSS while a fresh board is grown through it by tool calls: where the write path's memory goes.

    .venv/bin/python bench/bench_rss.py [--memories 2000] [--briefs 1000] [--batch 50] [--step 500]
                                        [--agents 16]
                                        [--idle 35] [--trim] [--env NAME=VALUE ...]

One ``memoryd serve`` with the default model on an empty board; one ``memoryd-shim`` agent stores
``--memories`` synthetic memories in ``store_memories`` calls of ``--batch`` (1: ``store_memory``
calls, one LanceDB write each while the writer keeps up), then ``--briefs`` copies of
board-v1's briefs are written as folders (the daemon embeds them); after every ``--step`` records it
waits until they are indexed and prints the daemon's RSS, split as the kernel counts it
(``/proc/PID/smaps_rollup``: anonymous = heaps, file-backed = mapped libraries and files), and the
peak since the last line. Then ``--agents`` agents store and search at once (peak RSS), the daemon idles
``--idle`` seconds (its scheduled index refresh runs 30 s after writes), and with ``--trim`` glibc's
``malloc_trim(0)`` is called inside it through gdb: what is left above the trimmed figure is free heap
memory glibc kept, what is left below it is live. Not in ``make bench``: a diagnostic, no targets.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _util import Briefs, RssSampler, arg_parser, daemon, quiet_env
from bench_memories import BATCH, memory_text, queries
from bench_users import UserShim, wait_indexed
from support.measure import engine_ready, hybrid_ready


def smaps(pid: int) -> dict[str, float]:
    """``{"rss", "anon", "file"}`` in MB from ``/proc/PID/smaps_rollup``."""
    kb: dict[str, int] = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                kb[parts[0].rstrip(":")] = int(parts[1])
    rss, anon = kb.get("Rss", 0), kb.get("Anonymous", 0)
    return {"rss": rss / 1024, "anon": anon / 1024, "file": (rss - anon) / 1024}


def line(label: str, pid: int, peak: float = 0.0, t0: float = 0.0) -> None:
    m = smaps(pid)
    extra = f", peak {peak:.0f}" if peak else ""
    print(
        f"{label:<34} rss {m['rss']:6.0f} MB (anon {m['anon']:5.0f}, file {m['file']:4.0f}){extra}"
        f"  [{time.perf_counter() - t0:6.1f} s]",
        flush=True,
    )


def gdb_trim(pid: int) -> str:
    """``malloc_trim(0)`` inside ``pid`` through gdb; gdb's output (or why it failed)."""
    try:
        out = subprocess.run(
            ["gdb", "-p", str(pid), "-batch", "-ex", "call (int) malloc_trim(0)"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return repr(exc)
    return (out.stdout + out.stderr).strip().splitlines()[-1:][0] if (out.stdout + out.stderr) else ""


def agents(d, n: int, rng: random.Random, made: list[int]) -> float:
    """``n`` agents, each 20 ``store_memory`` + 20 ``search_memories`` interleaved; the peak RSS (MB)."""

    def run(k: int) -> None:
        shim = UserShim(d.socket)
        try:
            for q in queries(20, seed=1000 + k):
                mtype, content, tags = memory_text(random.Random(k * 1000 + len(q)), 10**7 + k * 100)
                shim.tool("store_memory", {"content": content + f" a{k}-{q[:8]}", "tags": tags or ["b"]})
                shim.tool("search_memories", {"query": q})
        finally:
            shim.close()

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    with RssSampler(d.pid) as sampler:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    made[0] += 20 * n
    return sampler.peak


def main() -> int:
    parser = arg_parser(__doc__)
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--briefs", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=BATCH, help="memories per call (1: store_memory calls)")
    parser.add_argument("--step", type=int, default=500, help="records between RSS lines")
    parser.add_argument("--agents", type=int, default=16, help="agents at once at the end (0: none)")
    parser.add_argument("--idle", type=float, default=35.0, help="seconds idle before the last lines")
    parser.add_argument("--trim", action="store_true", help="malloc_trim(0) in the daemon through gdb")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the daemon")
    args = parser.parse_args()
    quiet_env()
    env = dict(kv.split("=", 1) for kv in args.env)
    work = Path(tempfile.mkdtemp(prefix="md-bench-rss-"))
    board = work / "board"
    board.mkdir()
    rng, t0 = random.Random(11), time.perf_counter()
    try:
        with daemon(board, work / "index", env=env) as d:
            d.wait_until(lambda s: engine_ready(s) and hybrid_ready(s), timeout=600)
            line("ready, empty board", d.pid, t0=t0)
            shim, made = UserShim(d.socket), [0]
            try:
                with RssSampler(d.pid) as sampler:
                    while made[0] < args.memories:
                        n = min(args.batch, args.memories - made[0])
                        items = []
                        for _ in range(n):
                            mtype, content, tags = memory_text(rng, made[0] + len(items))
                            items.append(
                                {"content": content, "tags": tags or ["bench"], "memory_type": mtype}
                            )
                        if n == 1:
                            shim.tool("store_memory", items[0])
                        else:
                            shim.tool("store_memories", {"items": items})
                        made[0] += n
                        if made[0] % args.step == 0 or made[0] == args.memories:
                            wait_indexed(d, made[0])
                            line(f"{made[0]:,} memories", d.pid, sampler.peak, t0)
                            sampler.peak = 0.0
                    briefs = Briefs(board)
                    while briefs.count < args.briefs:
                        briefs.write()
                        if briefs.count % args.step == 0 or briefs.count == args.briefs:
                            wait_indexed(d, made[0] + briefs.count)
                            line(f"+ {briefs.count:,} briefs", d.pid, sampler.peak, t0)
                            sampler.peak = 0.0
                if args.agents:
                    peak = agents(d, args.agents, rng, made)
                    line(f"after {args.agents} agents", d.pid, peak, t0)
                shim.tool("search_memories", {"query": "checkout"})
            finally:
                shim.close()
            time.sleep(args.idle)
            line(f"idle {args.idle:.0f} s", d.pid, t0=t0)
            if args.trim:
                print(f"gdb: {gdb_trim(d.pid)}", flush=True)
                line("after malloc_trim(0)", d.pid, t0=t0)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
