"""Where a ``store_memories`` batch's milliseconds go: an in-process daemon with the real model, timed pieces.

    .venv/bin/python bench/profile_batches.py [--grow 200] [--batches 4] [--rounds 2] [--cprofile FILE]

The engine, registry and app of ``memoryd serve`` in this process (``tests/support/inprocess_daemon``,
the daemon's own session code on an in-memory pipe: no socket, no shim), the default model, a fresh board.
``--grow`` single ``store_memory`` calls first (a store grown by tool calls), then per round the model
alone embeds the round's texts (batches of 50, in this process: the same-run baseline), and ``--batches``
``store_memories`` calls of 50 followed by one ``search_memories`` (until searchable, as
``bench/bench_users.py`` measures it). Pieces are timed by wrapping the functions that do them (every
thread; the model-alone baseline's own calls are not counted in them), with the calling thread's CPU time
beside each; per round also the process's CPU per batch against the model alone's, and per thread (CPU
is what 2 shared cores run out of: it moves far less with the load than wall time). ``--cprofile``: also
a cProfile of the worker threads' board passes and index writes (pstats; in thread CPU time, which a
loaded machine disturbs less than wall time). Not a benchmark of record: a
profile, for finding what is on the path.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from _util import load_average, quiet_env
from bench_memories import BATCH, memory_items

TIMES: dict[str, list[float]] = collections.defaultdict(list)
CPU: dict[str, list[float]] = collections.defaultdict(list)  # the calling thread's CPU ms per call
COUNTS: collections.Counter = collections.Counter()
_lock = threading.Lock()
PROFILES: dict[str, cProfile.Profile] = {}  # one per profiled label: each runs on one thread at a time
_profiling = threading.local()


def timed(owner, name: str, label: str, profile: bool = False) -> None:
    """Wrap ``owner.name`` so each call's wall time goes to ``TIMES[label]`` (and, with ``profile``, into
    :data:`PROFILE` when not nested in another profiled call)."""
    fn = getattr(owner, name)

    def wrapper(*a, **kw):
        t, c = time.perf_counter(), time.thread_time()
        nested = getattr(_profiling, "on", False)
        try:
            if profile and not nested and ARGS.cprofile:
                _profiling.on = True
                return PROFILES.setdefault(label, cProfile.Profile(time.thread_time)).runcall(fn, *a, **kw)
            return fn(*a, **kw)
        finally:
            if profile and not nested:
                _profiling.on = False
            with _lock:
                TIMES[label].append((time.perf_counter() - t) * 1000)
                CPU[label].append((time.thread_time() - c) * 1000)

    setattr(owner, name, wrapper)


def timed_async(owner, name: str, label: str) -> None:
    fn = getattr(owner, name)

    async def wrapper(*a, **kw):
        t = time.perf_counter()
        try:
            return await fn(*a, **kw)
        finally:
            TIMES[label].append((time.perf_counter() - t) * 1000)

    setattr(owner, name, wrapper)


def thread_cpu() -> dict[str, float]:
    """CPU seconds (user + system) of every thread of this process now, summed per name: Python threads by
    their name (a worker pool's numbers dropped), native ones (onnxruntime, LanceDB) by their kernel name."""
    named = {t.native_id: t.name.split("_")[0].rstrip("-0123456789") for t in threading.enumerate()}
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = collections.Counter()
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # the thread ended
        comm, fields = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
        out[named.get(int(tid), comm)] += (int(fields[11]) + int(fields[12])) / tick
    return out


def instrument() -> None:
    import memoryd.board.atomic as atomic
    import memoryd.kinds.memories.api as api
    import memoryd.kinds.memories.files as files
    import memoryd.kinds.memories.writes as writes
    from memoryd.core import indexer
    from memoryd.index import embed, store, unigram
    from memoryd.kinds.memories import source

    timed(api.Memories, "_store_sync", "board pass (store_many, under the lock)", profile=True)
    timed_async(api.Memories, "_index_admitted", "wait after the board pass (admit)")
    timed_async(api.Memories, "store_many", "store_many (board pass + admit)")
    timed(writes, "write_memory", "write_memory (one file)")
    timed(atomic, "write_all", "  file write + fsync")
    timed(atomic, "fsync_dir", "  fsync of the folder")
    timed(files, "_memories_dir", "  open the folder (gate)")
    timed(writes.BoardOps, "read", "  read the file first (dedupe)")
    timed(indexer.Indexer, "_apply", "index write (writer thread)", profile=True)
    timed(indexer.Indexer, "maintain", "index maintenance (refresh/optimize)")
    timed(indexer, "write_records", "  write_records (embed + LanceDB)")
    timed(source.MemorySource, "records_for", "  the source's batch (read back, records)")
    timed(embed.Embedder, "embed_passages", "    embed passages (the model)")
    timed(unigram.UnigramTokenizer, "encode_batch", "      tokenize (unigram)")
    timed(store.IndexStore, "upsert", "    LanceDB upsert + columns + tail")
    timed(store.IndexStore, "stored_hashes_for", "  stored_hashes_for")
    for cls, n in ((indexer.Indexer, "admit"),):
        orig = getattr(cls, n)

        def counting(self, paths, chars=0, _orig=orig):
            COUNTS["admit calls"] += 1
            COUNTS["admit paths"] += len(list(paths))
            return _orig(self, paths, chars)

        setattr(cls, n, counting)
    passages = embed.Embedder.embed_passages

    def sized(self, texts, *a, **kw):
        COUNTS[f"embed calls of {len(texts)}"] += 1  # how the writer's batches came out
        return passages(self, texts, *a, **kw)

    embed.Embedder.embed_passages = sized


def _per_batch(seconds_by_thread) -> str:
    """``name N ms`` per batch for each thread that used CPU, most first."""
    return ", ".join(
        f"{name} {s * 1000 / ARGS.batches:.0f} ms" for name, s in seconds_by_thread.most_common() if s > 0
    )


def main() -> int:
    global ARGS
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grow", type=int, default=200)
    p.add_argument("--batches", type=int, default=4)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--cprofile", type=Path)
    ARGS = p.parse_args()
    os.environ.setdefault("MEMORYD_TEST_MODELS", str(Path(__file__).resolve().parents[1] / ".cache/models"))
    quiet_env()
    instrument()
    from memoryd.index.embed import load_embedder
    from support.inprocess import MODELS
    from support.inprocess_daemon import InprocessDaemon, InprocessMemShim
    from support.memories import poll

    embedder, status = load_embedder(None, MODELS)
    if embedder is None:
        raise SystemExit(f"model unavailable: {status.detail}")
    item = memory_items()

    root = Path(tempfile.mkdtemp(prefix="md-prof-"))
    daemon = InprocessDaemon(root, model="", env={"MEMORYD_LOG_LEVEL": "error"}).start(timeout=600)
    print(f"load average at start {load_average()}", flush=True)
    try:
        with InprocessMemShim(daemon) as s:
            s.initialize()
            poll(lambda: daemon.status()["engine"]["search_mode"] == "hybrid", "the model warm", timeout=600)
            for _ in range(ARGS.grow):
                s.ok("store_memory", **item())
            s.ok("search_memories", query="warm up the query path")
            for r in range(ARGS.rounds):
                TIMES.clear()
                PROFILES.clear()  # the last round's only
                batches = [[item() for _ in range(BATCH)] for _ in range(ARGS.batches)]
                texts = [
                    f"{i['content']}\n{' '.join(i['tags'])}" for b in batches for i in b
                ]  # as the record embeds them
                t0, c0, alone0 = time.perf_counter(), time.process_time(), thread_cpu()
                for at in range(0, len(texts), BATCH):
                    embedder.embed_passages(texts[at : at + BATCH])
                model_s, model_cpu = time.perf_counter() - t0, time.process_time() - c0
                alone = thread_cpu()
                alone.subtract(alone0)
                (
                    TIMES.clear(),
                    COUNTS.clear(),
                )  # the pieces of the pipeline only (the model alone went through the same wrapper)
                CPU.clear()
                t0, c0, threads0 = time.perf_counter(), time.process_time(), thread_cpu()
                calls = []
                for b in batches:
                    t = time.perf_counter()
                    s.ok("store_memories", items=b)
                    calls.append((time.perf_counter() - t) * 1000)
                calls_ms = (time.perf_counter() - t0) * 1000
                t = time.perf_counter()
                s.ok("search_memories", query="what was decided about the release")
                search_ms = (time.perf_counter() - t) * 1000
                total_s, total_cpu = time.perf_counter() - t0, time.process_time() - c0
                threads = thread_cpu()
                threads.subtract(threads0)
                n = len(texts)
                print(
                    f"\nround {r + 1}: model alone {n / model_s:.0f} passages/s ({model_s * 1000 / ARGS.batches:.0f}"
                    f" ms per {BATCH}); batches {n / total_s:.0f} memories/s = {n / model_s and (n / total_s) / (n / model_s):.2f}x;"
                    f" CPU per {BATCH}: model alone {model_cpu * 1000 / ARGS.batches:.0f} ms, pipeline"
                    f" {total_cpu * 1000 / ARGS.batches:.0f} ms (this process);"
                    f" calls {calls_ms:.0f} ms ({', '.join(f'{c:.0f}' for c in calls)}), then the search {search_ms:.0f} ms;"
                    f" load {load_average()}"
                )
                for label, vals in TIMES.items():
                    print(
                        f"  {label:<48} n={len(vals):>4}  sum {sum(vals):8.1f} ms"
                        f"  per batch {sum(vals) / ARGS.batches:7.1f} ms  max {max(vals):7.1f}"
                        + (
                            f"  thread CPU per batch {sum(CPU[label]) / ARGS.batches:6.1f} ms"
                            if label in CPU
                            else ""
                        )
                    )
                print(f"  {dict(COUNTS)}")
                print("  CPU per batch by thread: " + _per_batch(threads))
                print(
                    "  model alone's CPU per batch by thread (the caller is MainThread): " + _per_batch(alone)
                )
                COUNTS.clear()
    finally:
        daemon.kill()
        shutil.rmtree(root, ignore_errors=True)
    for n, (label, prof) in enumerate(sorted(PROFILES.items()) if ARGS.cprofile else ()):
        out = ARGS.cprofile.with_suffix(f".{n}.pstats")
        prof.dump_stats(out)
        print(f"\n== cProfile: {label} ({out}) ==")
        pstats.Stats(str(out)).sort_stats("cumulative").print_stats(35)
    return 0


ARGS: argparse.Namespace

if __name__ == "__main__":
    sys.exit(main())
