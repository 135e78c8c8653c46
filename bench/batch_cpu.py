"""``store_memories`` batches through a real daemon and shim: CPU per batch of each process beside the model's.

    .venv/bin/python bench/batch_cpu.py [--batches 8] [--rounds 2] [--grow 100] [--join 1] [--singles 0] [--lone 0]

One ``memoryd serve`` of this checkout with the default model on a fresh board (its default info log),
one ``memoryd-shim``; ``--grow`` single ``store_memory`` calls first, then per round the model alone
embeds the round's texts in this process (batches of 50, the texts as the daemon embeds them: content and
tags), and ``--batches`` ``store_memories`` calls of 50 follow, then one ``search_memories`` (until
searchable). ``--lone`` batches follow, each alone after a quiet gap and followed by a search (an agent saving
its notes at the end of a task, then recalling): the answer's and the search's wall time beside the model
alone on the same texts. ``--singles`` single ``store_memory`` calls just before each round's batches (after the model
alone), as ``bench/bench_users.py`` stores a step's singles right before its batches. Printed per round: the wall ratio (as ``bench/bench_users.py`` measures it), and the CPU
seconds per batch of the model alone, the daemon, the shim and this client (``/proc/<pid>/stat``), and the
index maintenance that ended during the batches (from the daemon's log). On 2
shared cores the wall ratio swings with the load; the CPU ratio (model alone / daemon) barely does, and a
pipeline that keeps both cores busy cannot beat it. Linux only (``/proc``). Not in ``make bench``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from _util import MODELS, daemon, load_average, quiet_env
from bench_memories import BATCH, MemShim, memory_items
from support.measure import engine_ready, hybrid_ready


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def faults(pid: int) -> int:
    """Minor page faults of process ``pid`` so far: each maps and zeroes a fresh page (CPU in the kernel)."""
    return int(_stat(pid)[7])


def _stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    return stat[stat.rindex(")") + 2 :].split()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", type=int, default=8)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--grow", type=int, default=100)
    p.add_argument(
        "--singles", type=int, default=0, help="store_memory calls right before each round's batches"
    )
    p.add_argument(
        "--join",
        type=int,
        default=1,
        help="synthetic notes joined into each memory (4: ~150 tokens, long texts)",
    )
    p.add_argument(
        "--lone",
        type=int,
        default=0,
        help="then this many lone batches, each after --lone-gap s of quiet and followed by a search",
    )
    p.add_argument("--lone-gap", type=float, default=2.0)
    args = p.parse_args()
    quiet_env()
    from memoryd.index.embed import load_embedder
    from memoryd.kinds.memories.files import Memory
    from memoryd.kinds.memories.records import memory_record

    embedder, status = load_embedder(None, MODELS)
    if embedder is None:
        raise SystemExit(f"model unavailable: {status.detail}")
    note = memory_items()

    def item() -> dict:
        parts = [note() for _ in range(args.join)]
        return {**parts[0], "content": "\n".join(p["content"] for p in parts)}

    def embedded(items: list[dict]) -> list[str]:
        """The texts the daemon embeds for these items (content and tags)."""
        return [memory_record(Memory.new(i["content"], tags=tuple(i["tags"]))).embed_text for i in items]

    work = Path(tempfile.mkdtemp(prefix="md-bcpu-"))
    (work / "board").mkdir()
    try:
        with daemon(work / "board", work / "index") as d:
            d.wait_until(lambda s: engine_ready(s) and hybrid_ready(s), timeout=600)
            shim = MemShim(d.socket)
            try:
                for _ in range(args.grow):
                    shim.tool("store_memory", item())
                shim.tool("search_memories", {"query": "warm up the query path"})
                for r in range(args.rounds):
                    batches = [[item() for _ in range(BATCH)] for _ in range(args.batches)]
                    texts = embedded([i for b in batches for i in b])
                    embedder.embed_passages(texts[:8])  # warm
                    c0, t0 = time.process_time(), time.perf_counter()
                    for at in range(0, len(texts), BATCH):
                        embedder.embed_passages(texts[at : at + BATCH])
                    model_rate = len(texts) / (time.perf_counter() - t0)
                    model_cpu = (time.process_time() - c0) / args.batches
                    for _ in range(args.singles):
                        shim.tool("store_memory", item())
                    maintained = len(d.events("index_optimized"))
                    folded = len(d.events("index_tail_folded"))
                    f0 = faults(d.pid)
                    d0, s0, c0, t0 = (
                        cpu_s(d.pid),
                        cpu_s(shim.proc.pid),
                        time.process_time(),
                        time.perf_counter(),
                    )
                    for b in batches:
                        shim.tool("store_memories", {"items": b})
                    shim.tool("search_memories", {"query": "what was decided about the release"})
                    rate = len(texts) / (time.perf_counter() - t0)
                    per = [
                        (cpu_s(d.pid) - d0) / args.batches,
                        (cpu_s(shim.proc.pid) - s0) / args.batches,
                        (time.process_time() - c0) / args.batches,
                    ]
                    paged = (faults(d.pid) - f0) * os.sysconf("SC_PAGE_SIZE") / args.batches / 2**20
                    upkeep = [
                        f"{e.get('refresh_ms', '?')}+{e.get('optimize_ms', '?')}"
                        for e in d.events("index_optimized")[maintained:]
                    ] + [f"fold {e.get('ms', '?')}" for e in d.events("index_tail_folded")[folded:]]
                    print(
                        f"round {r + 1}: model alone {model_rate:.0f}/s, batches {rate:.0f}/s = "
                        f"{rate / model_rate:.2f}x; CPU per batch of {BATCH}: model alone {model_cpu * 1000:.0f} ms,"
                        f" daemon {per[0] * 1000:.0f} ms (ratio {model_cpu / per[0]:.2f}), shim"
                        f" {per[1] * 1000:.0f} ms, client {per[2] * 1000:.0f} ms; daemon's page faults"
                        f" {paged:.0f} MB per batch; index maintenance meanwhile (refresh+optimize ms, tail folds ms):"
                        f" {', '.join(upkeep) or 'none'}; load {load_average()}",
                        flush=True,
                    )
                for n in range(args.lone):  # an agent saving its notes at the end of a task, then recalling
                    time.sleep(args.lone_gap)
                    b = [item() for _ in range(BATCH)]
                    texts = embedded(b)
                    t0 = time.perf_counter()
                    embedder.embed_passages(texts)
                    alone = time.perf_counter() - t0
                    time.sleep(args.lone_gap)
                    t0 = time.perf_counter()
                    shim.tool("store_memories", {"items": b})
                    answered = time.perf_counter() - t0
                    shim.tool("search_memories", {"query": "what was decided about the release"})
                    searchable = time.perf_counter() - t0
                    print(
                        f"lone batch {n + 1}: answered {answered * 1000:.0f} ms, searchable {searchable * 1000:.0f} ms;"
                        f" the model alone {alone * 1000:.0f} ms; load {load_average()}",
                        flush=True,
                    )
            finally:
                shim.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
