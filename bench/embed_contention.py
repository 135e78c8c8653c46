"""The model beside another busy thread: a batch's runs one after another, against side by side.

    .venv/bin/python bench/embed_contention.py [--burn-ms 200] [--rounds 3] [--batches 20]

In this process, the default model embeds ``--batches`` batches of 50 synthetic notes (as the daemon embeds
them: content and tags) two ways, alternated round by round:

* ``intra-op``: a second session with onnxruntime's intra-op threads (one per core, at most 4), each
  batch's runs one after another on the calling thread (memoryd before runs ran side by side);
* ``shares``: memoryd's embedder as it is, each batch's runs side by side (``memoryd.index.runs``), one
  thread per run.

Each way alone, and with a thread beside it that, at the start of each batch, creates and fsyncs 50 small
files and then uses ``--burn-ms`` of CPU (the next batch's board pass, made heavier than the real one so
that it weighs on a slow machine what the real one weighs on a fast one: the ratio of the two is what
matters). Prints notes/s per round and the medians. Not in ``make bench``: a comparison, not a figure of
record.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time

from _util import MODELS, load_average, quiet_env
from bench_memories import BATCH, memory_items
from bench_users import embedded


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--burn-ms", type=float, default=200.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batches", type=int, default=20)
    args = p.parse_args()
    quiet_env()
    import onnxruntime as ort

    from memoryd.index import runs
    from memoryd.index.embed import load_embedder

    embedder, status = load_embedder(None, MODELS)
    if embedder is None:
        raise SystemExit(f"model unavailable: {status.detail}")
    item = memory_items()
    texts = [embedded(i["content"], i["tags"]) for i in (item() for _ in range(args.batches * BATCH))]
    batches = [texts[at : at + BATCH] for at in range(0, len(texts), BATCH)]

    options = ort.SessionOptions()
    options.intra_op_num_threads = runs.workers()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.use_device_allocator_for_initializers", "1")
    intra = ort.InferenceSession(
        str(embedder.model_dir / "model.onnx"), options, providers=["CPUExecutionProvider"]
    )
    ways = {"intra-op": (intra, runs.Pool(1)), "shares": (embedder._session, embedder._pool)}

    go, stop = threading.Event(), threading.Event()
    folder = tempfile.mkdtemp(prefix="memoryd-contention-")

    def beside() -> None:
        made = 0
        while not stop.is_set():
            if not go.wait(0.01):
                continue
            go.clear()
            start = time.thread_time()
            for _ in range(BATCH):
                with open(os.path.join(folder, f"{made}.md"), "w") as f:
                    f.write("x" * 300)
                    f.flush()
                    os.fsync(f.fileno())
                made += 1
            while time.thread_time() - start < args.burn_ms / 1000:
                sum(range(1000))

    threading.Thread(target=beside, daemon=True).start()
    print(
        f"load average at start {load_average()}; workers {runs.workers()}; beside: {args.burn_ms:.0f} ms of CPU"
    )
    rates: dict[tuple[str, bool], list[float]] = {}
    for _ in range(args.rounds):
        for way, (session, pool) in ways.items():
            embedder._session, embedder._pool = session, pool
            embedder.embed_passages(batches[0], hold=True)
            for busy in (False, True):
                t0 = time.perf_counter()
                for batch in batches:
                    if busy:
                        go.set()
                    embedder.embed_passages(batch, hold=True)
                rates.setdefault((way, busy), []).append(len(texts) / (time.perf_counter() - t0))
    stop.set()
    for (way, busy), got in rates.items():
        label = f"{way}, {'a busy thread beside' if busy else 'alone'}"
        print(f"{label:40s} notes/s per round {[round(r) for r in got]}  median {statistics.median(got):.0f}")
    print(f"load average at the end {load_average()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
