"""Daemon + shim benchmarks against a real ``memoryd serve`` with the model, on a copy of board-v1.

    .venv/bin/python bench/bench_daemon.py [--agents 16] [--searches 200] [--saves 20] [--quick] [--out FILE]

The daemon runs as a subprocess (``memoryd serve --socket /tmp/md-*/s.sock --board <copy> --index <tmp>``,
``MEMORYD_MODELS`` set) on an index pre-built from board-v1's records and vectors, and is used once its
status says the model is ready, searches run hybrid and the post-model rescan is done. It is always
stopped (SIGTERM, then SIGKILL). Agents are ``memoryd-shim --no-start`` subprocesses speaking raw MCP lines
on their stdin/stdout, as a coding agent would. Queries: board-v1/dev.jsonl.

* spawn -> ``initialize`` answered, per shim (p50/p95), beside ``python -c pass``, the floor;
* ``tools/call search_briefs`` through a shim vs the same call on a direct socket session
  (``memoryd.cli.client``) vs in-process ``search()`` on the same index (run back to back per query, in
  rotating order): the relay's added latency and the whole serving path's;
* one agent doing ``--searches`` searches, then ``--agents`` agents at once, each doing ``--searches``
  (p50/p95/p99, errors), with the daemon's RSS sampled every 50 ms in both phases, and each shim's RSS;
* save -> searchable: a new brief folder (brief.json, then said.txt with a made-up word) written while the
  daemon runs; ``search_briefs`` for that word is polled until the brief comes back (p50/p95).
"""

from __future__ import annotations

import json
import os
import random
import secrets
import shutil
import string
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _replica import load_base, with_vectors
from _util import MODELS, Report, RssSampler, arg_parser, daemon, dev_queries, pct, quiet_env, summary
from support.briefs import Shim, copy_board
from support.daemon import INIT, DaemonProcess
from support.measure import engine_ready, hybrid_ready, rss_mb, wait_post_model_pass

PROTOCOL = "2025-06-18"  # what the agents' shims negotiate here
LOST_AFTER_S = 20
# texts of the briefs saved while the daemon runs: varied, so that each is found by its own made-up word
SAVE_TITLES = [
    "Nightly export stops on customers without invoices",
    "Retry the webhook delivery with backoff",
    "Dark mode toggle forgets its state",
    "Search page times out on long queries",
    "Migrate the cron billing jobs to the orchestrator",
    "CSV import rejects UTF-8 files with a BOM",
]
SAVE_SAID = [
    "the export keeps crashing when a customer has zero invoices, fix it please",
    "webhooks pe retry nahi ho raha, add exponential backoff",
    "ダークモードの設定が再起動すると消える",
    "search page is timing out whenever the query is really long",
    "move the billing cron jobs into the workflow orchestrator, step one only",
    "the csv import says invalid encoding for files saved from excel",
]


def agent_shim(socket: Path, env: dict | None = None, tools: str | None = None) -> Shim:
    """One agent's ``memoryd-shim --no-start``, initialised, its answers read in the calling thread."""
    return Shim(socket, env, tools=tools, pump=False).initialize(PROTOCOL)


def shim_search(shim: Shim, query: str) -> dict:
    """The JSON-RPC answer to one ``search_briefs`` call through ``shim``."""
    return shim.request("tools/call", {"name": "search_briefs", "arguments": {"query": query}})


def answer_ok(answer: dict) -> bool:
    result = answer.get("result")
    return isinstance(result, dict) and not result.get("isError")


# --- the parts ----------------------------------------------------------------------------------------


def bench_spawn(report: Report, d: DaemonProcess, env: dict, runs: int) -> None:
    floor, spawn, rss = [], [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        floor.append((time.perf_counter() - t0) * 1000)
    for _ in range(runs):
        t0 = time.perf_counter()
        shim = Shim(d.socket, env, pump=False)
        shim.send(INIT)
        answer = shim.recv()
        spawn.append((time.perf_counter() - t0) * 1000)
        if "result" not in answer:
            raise RuntimeError(f"initialize through the shim failed: {str(answer)[:300]}")
        rss.append(rss_mb(shim.pid))
        shim.close()
    s, f = summary(spawn), summary(floor)
    report.raw["spawn_ms"], report.raw["python_floor_ms"], report.raw["shim_rss_idle_mb"] = s, f, summary(rss)
    report.row(
        "shim spawn -> initialize answered p50",
        s["p50"],
        "ms",
        baseline=f["p50"],
        baseline_label="python -c pass",
        target="<= 50 ms",
        met=s["p50"] <= 50,
    )
    report.row(
        "shim spawn -> initialize answered p95",
        s["p95"],
        "ms",
        baseline=f["p95"],
        baseline_label="python -c pass",
    )


def paired(a: list[float], b: list[float]) -> dict:
    """Summary of the per-sample differences ``a[i] - b[i]`` (same query, measured back to back)."""
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    return {**summary(diffs), "p5": pct(diffs, 0.05)}


def bench_paths(
    report: Report,
    d: DaemonProcess,
    env: dict,
    index: Path,
    embedder,
    queries: list[str],
    passes: int,
    pings: int,
) -> None:
    """search_briefs through a shim, on a direct socket session, and search() in-process, per query; then
    MCP ``ping`` through the shim and direct (the relay alone, without a search's own noise)."""
    from memoryd.cli.client import DaemonClient
    from memoryd.index.search import search
    from memoryd.index.store import IndexStore
    from memoryd.kinds.briefs.render import search_query

    store = IndexStore(index)  # the daemon's own index, read concurrently (LanceDB readers don't lock)
    times: dict[str, list[float]] = {"in-process": [], "direct": [], "shim": []}
    ping_times: dict[str, list[float]] = {"direct": [], "shim": []}
    shim = agent_shim(d.socket, env)
    try:
        with DaemonClient(d.socket) as client:
            calls = {
                "in-process": lambda q: search(store, embedder, search_query(q)),
                "direct": lambda q: client.call_tool("search_briefs", {"query": q}),
                "shim": lambda q: shim_search(shim, q),
            }
            names = list(calls)
            for q in queries[:10]:  # warm every path
                for name in names:
                    calls[name](q)
            per_query: dict[str, list[list[float]]] = {name: [[] for _ in queries] for name in names}
            for rep in range(passes):
                for i, q in enumerate(queries):
                    k = (i + rep) % 3
                    for name in names[k:] + names[:k]:
                        t0 = time.perf_counter()
                        calls[name](q)
                        ms = (time.perf_counter() - t0) * 1000
                        times[name].append(ms)
                        per_query[name][i].append(ms)
            ping = {
                "direct": lambda: client.request("ping"),
                "shim": lambda: shim.request("ping"),
            }
            for i in range(pings + 20):
                for name in ("direct", "shim") if i % 2 else ("shim", "direct"):
                    t0 = time.perf_counter()
                    ping[name]()
                    if i >= 20:  # the first 20 warm up
                        ping_times[name].append((time.perf_counter() - t0) * 1000)
    finally:
        shim.close()
    s = {k: summary(v) for k, v in times.items()}
    # per query, the fastest of its runs on each path: the least disturbed by the machine's other work
    best = {name: [min(runs) for runs in per_query[name]] for name in per_query}
    relay = paired(best["shim"], best["direct"])
    total = paired(best["shim"], best["in-process"])
    ping_relay = paired(ping_times["shim"], ping_times["direct"])
    report.raw["paths_ms"] = s
    report.raw["paired_ms"] = {"shim-direct": relay, "shim-in-process": total, "ping shim-direct": ping_relay}
    report.raw["ping_ms"] = {k: summary(v) for k, v in ping_times.items()}
    report.row(
        "search_briefs through the shim p50",
        s["shim"]["p50"],
        "ms",
        baseline=s["in-process"]["p50"],
        baseline_label="in-process search()",
    )
    report.row(
        "search_briefs on a direct socket session p50",
        s["direct"]["p50"],
        "ms",
        baseline=s["in-process"]["p50"],
        baseline_label="in-process search()",
    )
    report.row(
        "search_briefs: shim - in-process search(), per query p50",
        total["p50"],
        "ms",
        target="<= 1 ms",
        met=total["p50"] <= 1.0,
        note="daemon's MCP layer, answer rendering, socket and the shim's two hops",
    )
    report.row(
        "search_briefs: shim - direct socket, per query p50 (the relay)",
        relay["p50"],
        "ms",
        target="<= 1 ms",
        met=relay["p50"] <= 1.0,
    )
    report.row(
        "MCP ping round trip through the shim p50",
        summary(ping_times["shim"])["p50"],
        "ms",
        baseline=summary(ping_times["direct"])["p50"],
        baseline_label="direct socket",
    )
    report.row(
        "ping: shim - direct socket, paired p50 (the relay alone)",
        ping_relay["p50"],
        "ms",
        target="<= 1 ms",
        met=ping_relay["p50"] <= 1.0,
    )
    report.note(
        f"search paths: {len(queries)} queries x {passes} runs per path, the three paths back to back per "
        f"query in rotating order; the differences are medians over queries of (fastest run via one path - "
        f"fastest via the other): a search's own spread on a loaded machine is far larger than the relay "
        f"(p5..p95 of shim - direct: {relay['p5']:.1f}..{relay['p95']:.1f} ms); {pings} pings each way, "
        "interleaved"
    )


def run_agents(d: DaemonProcess, env: dict, agents: int, searches: int, queries: list[str]) -> dict:
    """``agents`` shims, each doing ``searches`` search_briefs calls as fast as answers come."""
    shims = [agent_shim(d.socket, env) for _ in range(agents)]
    latencies: list[list[float]] = [[] for _ in range(agents)]
    errors = [0] * agents
    modes: dict[str, int] = {}
    barrier = threading.Barrier(agents + 1)

    def agent(k: int) -> None:
        rng = random.Random(k)
        barrier.wait()
        for _ in range(searches):
            q = queries[rng.randrange(len(queries))]
            t0 = time.perf_counter()
            try:
                answer = shim_search(shims[k], q)
            except (OSError, EOFError, ValueError):
                errors[k] += 1
                continue
            latencies[k].append((time.perf_counter() - t0) * 1000)
            if not answer_ok(answer):
                errors[k] += 1
            else:
                mode = (answer["result"].get("structuredContent") or {}).get("mode", "?")
                modes[mode] = modes.get(mode, 0) + 1

    threads = [threading.Thread(target=agent, args=(k,)) for k in range(agents)]
    for t in threads:
        t.start()
    with RssSampler(d.pid) as sampler:
        barrier.wait()
        t0 = time.perf_counter()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - t0
    shim_rss = [rss_mb(s.pid) for s in shims]
    for s in shims:
        s.close()
    flat = [x for lat in latencies for x in lat]
    return {
        "latency_ms": summary(flat),
        "errors": sum(errors),
        "calls": agents * searches,
        "elapsed_s": elapsed,
        "searches_per_s": len(flat) / elapsed,
        "daemon_rss_peak_mb": sampler.peak,
        "daemon_rss_end_mb": sampler.last,
        "shim_rss_mb": summary(shim_rss),
        "modes": modes,
    }


def bench_agents(
    report: Report, d: DaemonProcess, env: dict, agents: int, searches: int, queries: list[str]
) -> None:
    idle = d.rss_mb()
    one = run_agents(d, env, 1, searches, queries)
    many = run_agents(d, env, agents, searches, queries)
    report.raw |= {"daemon_rss_idle_mb": idle, "one_agent": one, "many_agents": many}
    lo, hi = one["latency_ms"], many["latency_ms"]
    report.row(f"1 agent x {searches} searches: p50", lo["p50"], "ms")
    report.row(f"1 agent x {searches} searches: p95 / p99", f"{lo['p95']:.1f} / {lo['p99']:.1f} ms")
    report.row(
        f"{agents} agents x {searches} searches at once: p50",
        hi["p50"],
        "ms",
        baseline=lo["p50"],
        baseline_label="1 agent",
    )
    report.row(
        f"{agents} agents x {searches} searches at once: p95",
        hi["p95"],
        "ms",
        baseline=lo["p95"],
        baseline_label="1 agent",
    )
    report.row(
        f"{agents} agents x {searches} searches at once: p99",
        hi["p99"],
        "ms",
        baseline=lo["p99"],
        baseline_label="1 agent",
    )
    report.row(
        f"{agents} agents: throughput",
        many["searches_per_s"],
        "searches/s",
        baseline=one["searches_per_s"],
        baseline_label="1 agent",
    )
    report.row(
        f"{agents} agents: errors",
        many["errors"],
        target="0",
        met=many["errors"] == 0 and one["errors"] == 0,
        note=f"of {many['calls']:,} calls; modes {many['modes']}",
    )
    report.row(
        f"daemon RSS, {agents} agents (peak while searching)",
        many["daemon_rss_peak_mb"],
        "MB",
        baseline=one["daemon_rss_peak_mb"],
        baseline_label="1 agent",
        note=f"idle before: {idle:.0f} MB",
    )
    shim = many["shim_rss_mb"]
    report.row(
        f"shim RSS after {searches} relayed searches (max of {agents})",
        shim["max"],
        "MB",
        target="<= 20 MB",
        met=shim["max"] <= 20,
        note=f"median {shim['p50']:.1f} MB",
    )


def bench_saves(report: Report, d: DaemonProcess, board: Path, saves: int) -> None:
    from memoryd.cli.client import DaemonClient

    tasks = [json.loads(p.read_text()) for p in sorted((board / "tasks").glob("*.json"))]
    rng = random.Random(3)
    times, polls, lost = [], [], []
    optimized_before = d.log_path.read_text(errors="replace").count('"index_optimized"')
    with DaemonClient(d.socket) as client:
        for n in range(saves):
            task = tasks[n % len(tasks)]
            brief_id = f"b-{time.strftime('%Y%m%d', time.gmtime())}-{secrets.token_hex(3)}"
            word = "zq" + "".join(rng.choice(string.ascii_lowercase) for _ in range(8))
            meta = {
                "id": brief_id,
                "task": task["id"],
                "project": task["project"],
                "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "title": f"{word}: {rng.choice(SAVE_TITLES)}",
                "summary": rng.choice(SAVE_TITLES),
            }
            said = f"{rng.choice(SAVE_SAID)} ({word})\n"
            folder = board / "briefs" / brief_id
            t0 = time.perf_counter()
            folder.mkdir()
            (folder / "brief.json").write_text(json.dumps(meta))
            (folder / "said.txt").write_text(said)
            count = 0
            while True:
                count += 1
                answer = client.call_tool("search_briefs", {"query": word})
                if any(r.get("brief_id") == brief_id for r in answer.get("results", [])):
                    times.append((time.perf_counter() - t0) * 1000)
                    polls.append(count)
                    break
                if time.perf_counter() - t0 > LOST_AFTER_S:
                    lost.append(lost_save(client, d, brief_id, word, n))
                    print(
                        f"save {n}: {brief_id} not searchable after {LOST_AFTER_S} s: {lost[-1]}", flush=True
                    )
                    break
                time.sleep(0.02)
            time.sleep(0.3)
    optimized = d.log_path.read_text(errors="replace").count('"index_optimized"') - optimized_before
    report.raw["save_to_searchable_each_ms"] = times
    report.raw["saves_lost"] = lost
    report.row(
        f"saves never searchable (within {LOST_AFTER_S} s)",
        len(lost),
        target="0",
        met=not lost,
        note=f"of {saves}",
    )
    if not times:
        return
    s = summary(times)
    report.raw["save_to_searchable_ms"] = s
    report.row("save -> searchable p50", s["p50"], "ms")
    report.row(
        "save -> searchable p95", s["p95"], "ms", target="<= 1000 ms", met=s["p95"] <= 1000 and not lost
    )
    report.note(
        f"save -> searchable: {saves} new briefs, each with a made-up word that search_briefs is polled for "
        f"(percentiles over the {len(times)} found); the watcher's per-brief debounce is 250 ms; polls every "
        f"~20 ms plus a search's own time (median {sorted(polls)[len(polls) // 2]} polls per save); slowest "
        f"{max(times):.0f} ms; the daemon's scheduled index optimisation (30 s after writes, exclusive) ran "
        f"{optimized} time(s) during the saves"
    )


def lost_save(client, d: DaemonProcess, brief_id: str, word: str, n: int) -> dict:
    """What the daemon knows of a brief that never became searchable (for the report and the log)."""
    status = d.summary() or {}
    found = client.call_tool("search_briefs", {"query": word, "limit": 50})
    return {
        "save": n,
        "brief_id": brief_id,
        "daemon_briefs": status.get("briefs"),
        "daemon_records": status.get("records"),
        "found_by_word_alone": any(r.get("brief_id") == brief_id for r in found.get("results", [])),
        "get_brief_ok": bool(client.call_tool("get_brief", {"brief_id": brief_id}).get("brief_id")),
    }


def prebuilt_index(index: Path, board: Path, embedder, cache: Path | None) -> None:
    """The board copy's records with their vectors, written the way the daemon's sync would."""
    from memoryd.index.store import IndexStore

    base = load_base(board)
    with_vectors(base, embedder, cache)
    store = IndexStore(index)
    store.upsert(base.records, base.vectors, base.model)
    store.optimize(purge=True)


def main() -> int:
    parser = arg_parser(__doc__)
    parser.add_argument("--agents", type=int, default=16)
    parser.add_argument("--searches", type=int, default=200, help="searches per agent")
    parser.add_argument("--saves", type=int, default=20)
    parser.add_argument("--spawns", type=int, default=40)
    parser.add_argument("--cache", type=Path, help="folder for the base vectors shared by benchmarks")
    args = parser.parse_args()
    if args.quick:
        args.searches, args.saves, args.spawns = (
            min(args.searches, 30),
            min(args.saves, 6),
            min(args.spawns, 15),
        )
    quiet_env()
    from memoryd.index.embed import load_embedder

    report = Report("daemon", "Daemon and shims")
    embedder, status = load_embedder(None, MODELS)
    if embedder is None:
        sys.exit(f"model unavailable: {status.detail}")
    queries = dev_queries()
    work = Path(tempfile.mkdtemp(prefix="md-bench-daemon-"))
    board, index = work / "board", work / "index"
    copy_board(load_base().board, board)
    prebuilt_index(index, board, embedder, args.cache)
    # what an agent gives its shim: HOME and a few basics (contract §2), plus this daemon's socket flag
    env = {k: os.environ[k] for k in ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER") if k in os.environ}
    env["MEMORYD_NO_START"] = "1"
    try:
        with daemon(board, index) as d:
            d.wait_until(engine_ready, timeout=300)
            # the start-up reconcile is done; once the model is warm the daemon rescans the board (nothing to
            # embed here): measure only after that second pass, so it does not overlap the first figures
            first = d.summary()["raw"]["engine"].get("last_indexed_at")
            ready_s = d.wait_until(hybrid_ready, timeout=300)
            if wait_post_model_pass(d, first, timeout=120) is None:
                report.note("the daemon's post-model pass over the index was not observed within 120 s")
            report.row("memoryd serve: spawn -> hybrid search ready (200 briefs, index exists)", ready_s, "s")
            print(f"daemon up (pid {d.pid}), hybrid after {ready_s:.1f} s", flush=True)
            bench_spawn(report, d, env, args.spawns)
            bench_paths(report, d, env, index, embedder, queries[::4] if args.quick else queries, 2, 300)
            bench_agents(report, d, env, args.agents, args.searches, queries)
            bench_saves(report, d, board, args.saves)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report.finish(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
