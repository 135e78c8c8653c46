"""Memories and briefs as users meet them: a fresh board grown by tool calls, searched after each step.

    .venv/bin/python bench/bench_users.py [--sizes 200,2000] [--big] [--searches 100] [--batches 4]
                                          [--fill singles|batches] [--sample 200] [--agents 16]
                                          [--quick] [--out FILE]

One ``memoryd serve`` with the default model on an empty board, and ``memoryd-shim --no-start`` agents
speaking raw MCP lines, the way the peers' harness (``shared/bench-peers``) compares memory servers: no
pre-built index, every memory arrives through a tool call, so LanceDB holds what single-row writes
leave behind. For each size step (``--sizes``; ``--big`` adds 10,000, which takes long on 2 cores):

* memories: ``store_memory`` one call at a time until the board holds the step's number of memories
  (per-call p50/p95; ``--fill batches``: the step is filled with ``store_memories`` calls of 50, its
  last ``--sample`` memories stored one call each for the p50/p95, so 100,000 is reachable), then
  ``--batches`` ``store_memories`` calls of 50 (memories/s until the first
  search after them answers, beside the model's own passage throughput measured in this process on the
  same texts, as the daemon embeds them: content and tags; the mean of a run just before the batches and
  one just after, each with the daemon idle). A store answers before its index write, and the next search waits for the writes
  acknowledged before it: the first search after the singles and after the batches is shown apart;
* ``search_memories`` through the shim (``--searches`` queries, p50/p95);
* briefs written as files (board-v1's 200 real briefs, copied with new ids) one folder at a time until the
  board holds the step's number of briefs; save -> searchable for a few of them (a made-up word polled
  with ``search_briefs``), then, once the daemon is idle (the compaction the end of the stream starts),
  ``search_briefs`` p50/p95 on board-v1's dev queries;
* ``--agents`` agents at once (each a ``memoryd-shim`` process, a thread here): each makes
  :data:`AGENT_CALLS` ``store_memory`` and as many ``search_memories`` calls, interleaved; p50/p95 of
  each kind, calls/s of all of them, the daemon's peak RSS meanwhile;
* the daemon's RSS after each step (and its peak while the calls ran);
* after the last step, board-v1's 200 briefs as the peers' harness stores them (title, summary, said,
  prompt, outcome: longer texts) in ``store_memories`` calls of 50, beside the model alone on them;
* the same calls, in the same run, on a plain SQLite FTS5 store (stdlib ``sqlite3``, one commit per store,
  no embedding, no MCP): the floor each figure is divided by;
* load averages at the start and the end (the report's).
"""

from __future__ import annotations

import random
import shutil
import string
import sys
import tempfile
import threading
import time
from pathlib import Path

from _util import (
    Briefs,
    Floor,
    Report,
    RssSampler,
    arg_parser,
    board_texts,
    daemon,
    dev_queries,
    file_creation_ms,
    model_throughput,
    quiet_env,
    summary,
    timed,
    wait_idle,
)
from bench_memories import BATCH, MemShim, memory_text, queries
from support.daemon import DaemonProcess
from support.measure import engine_ready, hybrid_ready

LOST_AFTER_S = 20
#: store_memory calls (and as many search_memories) each agent of the agents phase makes
AGENT_CALLS = 20


class UserShim(MemShim):
    """An agent with the memories and the briefs tools."""

    def __init__(self, socket: Path) -> None:
        super().__init__(socket, tools="memories,briefs")


BOARD_TAG = "board"


def embedded(content: str, tags: list[str]) -> str:
    """The text the daemon embeds for a memory of ``content`` stored with ``tags`` (``["bench"]`` when none,
    as the steps store them): the model alone is measured on exactly that, so the ratio is the pipeline's."""
    from memoryd.kinds.memories.files import Memory
    from memoryd.kinds.memories.records import memory_record

    return memory_record(Memory.new(content, tags=tuple(tags or ["bench"]))).embed_text


def records(d: DaemonProcess) -> int:
    status = d.summary() or {}
    return ((status.get("raw") or {}).get("engine") or {}).get("records") or status.get("records") or 0


def step(
    report: Report, size: int, d: DaemonProcess, shim: UserShim, briefs: Briefs, floor: Floor, args, st
) -> None:
    rng, label = st["rng"], f"{size:,}"

    def item() -> dict:
        mtype, content, tags = memory_text(rng, st["made"])
        st["made"] += 1
        return {"content": content, "tags": tags or ["bench"], "memory_type": mtype, "importance": 3}

    singles, floor_singles = [], []
    with RssSampler(d.pid) as sampler:
        filled = fill_batches(shim, floor, item, size - args.sample - st["memories"], args)
        st["memories"] += filled
        while st["memories"] < size:
            one = item()
            singles.append(timed(shim.tool, "store_memory", one))
            floor_singles.append(timed(floor.store, [(one["content"], " ".join(one["tags"]))]))
            st["memories"] += 1
        qs = queries(args.searches + 12, seed=size)
        after_singles = timed(shim.tool, "search_memories", {"query": qs[-1]})
        batch_items = [[item() for _ in range(BATCH)] for _ in range(args.batches)]
        create_ms = file_creation_ms(st["work"] / f"probe-{size}")
        as_embedded = [embedded(i["content"], i["tags"]) for b in batch_items for i in b]
        # the model alone on exactly these texts, once the daemon is idle, just before the batches and
        # again just after: this machine's speed drifts by a fifth within minutes, so one figure taken
        # on one side of the batches would flatter or sink them; their mean brackets the batches
        wait_idle(d.pid)
        model_before = model_throughput(as_embedded)
        t0 = time.perf_counter()
        for items in batch_items:
            shim.tool("store_memories", {"items": items})
        calls_ms = (time.perf_counter() - t0) * 1000
        after_batches = timed(shim.tool, "search_memories", {"query": qs[-2]})  # waits for their index write
        batch_rate = args.batches * BATCH / (time.perf_counter() - t0)
        st["memories"] += args.batches * BATCH
        st["memory_idle_s"] = wait_idle(d.pid)
        model_after = model_throughput(as_embedded)
        model_rate = (model_before + model_after) / 2
        t0 = time.perf_counter()
        for items in batch_items:
            floor.store([(i["content"], " ".join(i["tags"])) for i in items])
        floor_batch_rate = args.batches * BATCH / (time.perf_counter() - t0)
        for q in qs[:10]:
            shim.tool("search_memories", {"query": q})
        search = [timed(shim.tool, "search_memories", {"query": q}) for q in qs[10:-2]]
        floor_search = [timed(floor.search, q) for q in qs[10:-2]]
        saves, lost = brief_steps(d, shim, briefs, min(size, args.briefs_upto), floor, st["memories"])
        # as for the memories above: once the daemon has done what the writes left it (the compaction
        # the end of a stream of briefs starts), so the figure is the search's, not the compaction's
        st["brief_idle_s"] = wait_idle(d.pid)
        bq = dev_queries()[: args.searches]
        brief_search = [timed(shim.tool, "search_briefs", {"query": q}) for q in bq]
    s1, fs1, ss, fss, bs = map(summary, (singles, floor_singles, search, floor_search, brief_search))
    n_single = len(singles)
    filled_note = f"after {filled:,} stored in batches of {BATCH}; " if filled else ""
    report.row(
        f"{label}: store_memory p50",
        s1["p50"],
        "ms",
        baseline=fs1["p50"],
        baseline_label="FTS5",
        target="<= 60 ms",
        met=s1["p50"] <= 60,
        note=f"{filled_note}{n_single} calls since the last step (then {args.batches} batches of {BATCH})",
    )
    report.row(
        f"{label}: store_memory p95",
        s1["p95"],
        "ms",
        baseline=fs1["p95"],
        baseline_label="FTS5",
        target="<= 150 ms",
        met=s1["p95"] <= 150,
    )
    report.row(
        f"{label}: store_memories, batches of {BATCH}",
        batch_rate,
        "memories/s",
        baseline=model_rate,
        baseline_label="the model alone on these texts, mean of just before and just after (passages/s)",
        target=">= 0.8 x the model",
        met=batch_rate >= 0.8 * model_rate,
        note=f"the model {model_before:,.0f}/s before, {model_after:,.0f}/s after; "
        f"FTS5: {floor_batch_rate:,.0f}/s; until searchable: the calls answered in "
        f"{calls_ms:,.0f} ms, the first search after them in {after_batches:,.0f} ms; a new file beside "
        f"the board cost {create_ms:.2f} ms of CPU (the file system's share of each note)",
    )
    report.row(
        f"{label}: the first search_memories after the single stores",
        after_singles,
        "ms",
        note="waits for the index writes the stores left (the read barrier)",
    )
    n_briefs = min(size, args.briefs_upto)
    briefs_named = f"search_briefs ({n_briefs:,} briefs)" if n_briefs != size else "search_briefs"
    p50_bar = 50 if size >= 100_000 else 20  # the targets: <= 20 ms at 200 and 10,000, <= 50 ms at 100,000
    waits = (
        (("search_memories", ss, fss), st["memory_idle_s"]),
        ((briefs_named, bs, fss), st["brief_idle_s"]),
    )
    for (name, s, f), idle_s in waits:
        report.row(
            f"{label}: {name} p50",
            s["p50"],
            "ms",
            baseline=f["p50"],
            baseline_label="FTS5",
            target=f"<= {p50_bar} ms",
            met=s["p50"] <= p50_bar,
            note=f"after the daemon went idle ({idle_s:.1f} s)",
        )
        report.row(
            f"{label}: {name} p95",
            s["p95"],
            "ms",
            baseline=f["p95"],
            baseline_label="FTS5",
            target="<= 50 ms" if size < 100_000 else "",
            met=s["p95"] <= 50 if size < 100_000 else None,
        )
    if saves:
        sv = summary(saves)
        report.row(
            f"{label}: brief file saved -> searchable p50 / p95",
            f"{sv['p50']:.0f} / {sv['p95']:.0f} ms",
            note=f"{len(saves)} saves, {lost} never found within {LOST_AFTER_S} s",
        )
    report.row(
        f"{label}: daemon RSS after the step / peak during it", f"{d.rss_mb():.0f} / {sampler.peak:.0f} MB"
    )
    if args.agents:
        agents(report, label, d, floor, item, args, st)
    report.raw[f"size_{size}"] = {
        "store_ms": s1,
        "floor_store_ms": fs1,
        "search_ms": ss,
        "floor_search_ms": fss,
        "brief_search_ms": bs,
        "batch_per_s": batch_rate,
        "model_per_s": model_rate,
        "model_before_after_per_s": [model_before, model_after],
        "file_creation_cpu_ms": create_ms,
        "first_search_after_singles_ms": after_singles,
        "first_search_after_batches_ms": after_batches,
        "saves_ms": saves,
    }
    print(
        f"step {label}: store p50 {s1['p50']:.0f} p95 {s1['p95']:.0f} ms; search {ss['p50']:.0f}/"
        f"{ss['p95']:.0f} ms; briefs {bs['p50']:.0f}/{bs['p95']:.0f} ms",
        flush=True,
    )


def board_batches(report: Report, shim: UserShim, texts: list[str], model_rate: float, at: int) -> None:
    """The board texts in ``store_memories`` calls of :data:`BATCH`, until the first search after them
    answers, beside the model alone on the same texts."""
    t0 = time.perf_counter()
    for i in range(0, len(texts), BATCH):
        shim.tool(
            "store_memories", {"items": [{"content": t, "tags": [BOARD_TAG]} for t in texts[i : i + BATCH]]}
        )
    calls_ms = (time.perf_counter() - t0) * 1000
    shim.tool("search_memories", {"query": "checkout button"})  # waits for their index write
    rate = len(texts) / (time.perf_counter() - t0)
    report.row(
        f"board-v1's {len(texts)} texts (median {sorted(map(len, texts))[len(texts) // 2]:,} chars): "
        f"store_memories, batches of {BATCH}",
        rate,
        "memories/s",
        baseline=model_rate,
        baseline_label="the model alone on these texts (passages/s)",
        target=">= 0.8 x the model",
        met=rate >= 0.8 * model_rate,
        note=f"stored on top of the last step ({at:,} memories); the calls answered in {calls_ms:,.0f} ms",
    )


def fill_batches(shim: UserShim, floor: Floor, item, count: int, args) -> int:
    """Store ``count`` memories (if positive) in ``store_memories`` calls of :data:`BATCH`, the floor
    likewise; returns how many were stored."""
    done = 0
    while done < count:
        items = [item() for _ in range(min(BATCH, count - done))]
        shim.tool("store_memories", {"items": items})
        floor.store([(i["content"], " ".join(i["tags"])) for i in items])
        done += len(items)
    return done


def agents(report: Report, label: str, d: DaemonProcess, floor: Floor, item, args, st) -> None:
    """``--agents`` shims storing and searching at once (see the module docstring); the floor makes the
    same calls one after another in this process."""
    n = args.agents
    plans = [[(item(), q) for q in queries(AGENT_CALLS, seed=1000 + k)] for k in range(n)]
    times: dict[str, list[float]] = {"store_memory": [], "search_memories": []}
    failures: list[str] = []
    go = threading.Barrier(n + 1)

    def agent(plan) -> None:
        shim = None
        try:
            shim = UserShim(d.socket)  # a fresh memoryd-shim process
            go.wait(120)
            for one, q in plan:
                ms = timed(shim.tool, "store_memory", one)
                times["store_memory"].append(ms)  # list.append is atomic
                times["search_memories"].append(timed(shim.tool, "search_memories", {"query": q}))
        except Exception as exc:  # counted, not raised: a thread's exception would vanish
            failures.append(repr(exc)[:200])
            if go.n_waiting:
                go.abort()
        finally:
            if shim is not None:
                shim.close()

    threads = [threading.Thread(target=agent, args=(plan,)) for plan in plans]
    for t in threads:
        t.start()
    with RssSampler(d.pid) as sampler:
        go.wait(120)
        t0 = time.perf_counter()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - t0
    st["memories"] += sum(len(p) for p in plans)
    fl = {"store_memory": [], "search_memories": []}
    for plan in plans:
        for one, q in plan:
            fl["store_memory"].append(timed(floor.store, [(one["content"], " ".join(one["tags"]))]))
            fl["search_memories"].append(timed(floor.search, q))
    calls = sum(len(v) for v in times.values())
    for name, values in times.items():
        s, f = summary(values or [0.0]), summary(fl[name])
        for q in ("p50", "p95"):
            report.row(
                f"{label}: {n} agents at once: {name} {q}", s[q], "ms", baseline=f[q], baseline_label="FTS5"
            )
    report.row(
        f"{label}: {n} agents at once: calls/s",
        calls / elapsed,
        "calls/s",
        note=f"{calls} calls ({AGENT_CALLS} stores and {AGENT_CALLS} searches each, interleaved); "
        f"daemon peak RSS {sampler.peak:.0f} MB; {len(failures)} agents failed",
    )
    report.raw[f"agents_{label}"] = {k: summary(v or [0.0]) for k, v in times.items()} | {
        "calls_per_s": calls / elapsed,
        "peak_rss_mb": sampler.peak,
        "failures": failures,
    }


def brief_steps(
    d: DaemonProcess, shim: UserShim, briefs: Briefs, size: int, floor: Floor, st_memories: int
) -> tuple[list[float], int]:
    """Write briefs until ``size``; a few carry a made-up word polled for. (save ms list, lost count)."""
    rng = random.Random(size)
    probes = set(range(briefs.count, size, max(1, (size - briefs.count) // 10)))
    saves, lost = [], 0
    while briefs.count < size:
        word = (
            "zq" + "".join(rng.choice(string.ascii_lowercase) for _ in range(8))
            if briefs.count in probes
            else ""
        )
        if word:  # a probe: once the writer has indexed the briefs before it (no backlog in the figure)
            wait_indexed(d, st_memories + briefs.count)
        t0 = time.perf_counter()
        brief_id = briefs.write(word)
        floor.store([(word or brief_id, "")])
        while word:
            answer = shim.tool("search_briefs", {"query": word})
            results = answer.get("results") or (answer.get("result") or {}).get("results") or []
            if any(r.get("brief_id") == brief_id for r in results):
                saves.append((time.perf_counter() - t0) * 1000)
                break
            if time.perf_counter() - t0 > LOST_AFTER_S:
                lost += 1
                break
            time.sleep(0.02)
    wait_indexed(d, size + st_memories)
    return saves, lost


def wait_indexed(d: DaemonProcess, count: int, timeout: float = 600.0) -> None:
    deadline = time.perf_counter() + timeout
    while records(d) < count and time.perf_counter() < deadline:
        time.sleep(0.2)


def main() -> int:
    parser = arg_parser(__doc__)
    parser.add_argument("--sizes", default="200,2000", help="comma-separated step sizes (default 200,2000)")
    parser.add_argument("--big", action="store_true", help="also 10,000 (long on 2 cores)")
    parser.add_argument("--searches", type=int, default=100)
    parser.add_argument("--batches", type=int, default=4, help=f"store_memories calls of {BATCH} per step")
    parser.add_argument(
        "--fill", choices=("singles", "batches"), default="singles", help="how each step is filled"
    )
    parser.add_argument(
        "--sample", type=int, default=200, help="single store_memory calls per step (--fill batches)"
    )
    parser.add_argument("--agents", type=int, default=16, help="agents at once after each step (0: none)")
    parser.add_argument(
        "--briefs-upto",
        type=int,
        default=10**9,
        help="grow the briefs to the step's size but no further than this (each copy is embedded again: "
        "~15 briefs/s on 2 cores)",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")] + ([10_000] if args.big else [])
    if args.fill == "singles":
        args.sample = max(sizes)  # every memory arrives one call at a time
    if args.quick:
        sizes, args.searches, args.batches = [200], 40, 2
    quiet_env()
    report = Report("users", "Memories and briefs grown by tool calls, searched through the shim")
    work = Path(tempfile.mkdtemp(prefix="md-bench-users-"))
    rng = random.Random(11)
    sample_rng = random.Random(5)
    sample = [embedded(*memory_text(sample_rng, 10**6 + n)[1:]) for n in range(args.batches * BATCH)]
    st = {"rng": rng, "made": 0, "memories": 0, "first": sizes[0], "model_rate": model_throughput(sample)}
    st["work"] = work
    report.row(
        "the model's own passage throughput (this process)",
        st["model_rate"],
        "passages/s",
        note=f"{len(sample)} memory texts in batches of {BATCH}, as the daemon embeds them (content and tags), "
        "before the daemon starts; each step's batches are compared with the model alone on their own texts, measured right after them with the daemon idle",
    )
    board, index = work / "board", work / "index"
    board.mkdir()
    try:
        with daemon(board, index) as d:
            d.wait_until(lambda s: engine_ready(s) and hybrid_ready(s), timeout=600)
            briefs, floor = Briefs(board), Floor(work / "floor.db")
            shim = UserShim(d.socket)
            try:
                for size in sizes:
                    step(report, size, d, shim, briefs, floor, args, st)
                texts = board_texts()
                as_embedded = [embedded(t, [BOARD_TAG]) for t in texts]
                wait_idle(d.pid)
                board_batches(report, shim, texts, model_throughput(as_embedded), st["memories"])
            finally:
                shim.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report.note(
        "fresh board and index; every memory arrives through a tool call (no pre-built index); briefs "
        "are board-v1's real briefs copied with new ids, written as folders while the daemon runs"
    )
    report.note(
        "FTS5 floor: stdlib sqlite3, WAL, synchronous=FULL, one commit per store, OR of the query's "
        "words ranked by bm25; in this process (no MCP, no shim, no embedding)"
    )
    report.finish(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
