"""Daemon memory and the new-agent path, against a real ``memoryd serve`` with the model.

    .venv/bin/python bench/bench_footprint.py [--size 10000] [--agents 16] [--searches 100] [--spawns 40]

* where the model's memory goes: a fresh child process loads the embedder step by step (imports,
  tokenizer, onnxruntime session, one query, a batch of passages) and reports its RSS after each step;
* the daemon's RSS: idle on an empty board, then idle on a board of ``--size`` briefs (replicas of
  board-v1, written as folders, with an index holding the originals' vectors), after 40 searches of one agent (their p50/p95 through the shim), and while
  ``--agents`` shims search at once (peak and end); with a breakdown from ``/proc/<pid>/smaps_rollup``;
* the new-agent path with the daemon warm: spawn a shim -> ``initialize`` -> ``initialized`` ->
  ``tools/call search_briefs`` answered (p50/p95), for each way of starting the shim (:data:`SHIMS`),
  interleaved with ``python -c pass`` (the floor) and ``python -S -c pass``; the shim's RSS then.

Speed and memory are measured here only. The machine's load average is printed at start and end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _replica import build_index, load_base, with_vectors, write_board
from _util import MODELS, REPO, Report, arg_parser, daemon, dev_queries, quiet_env, summary
from bench_daemon import PROTOCOL, agent_shim, answer_ok, run_agents, shim_search
from support.briefs import SHIM, Shim
from support.daemon import DaemonProcess
from support.measure import engine_ready, hybrid_ready, rss_mb, wait_post_model_pass

STEPS = r"""
import gc, json, os, sys
from pathlib import Path
def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS")) / 1024
out = {"python": rss()}
import numpy, onnxruntime
out["numpy + onnxruntime imported"] = rss()
from memoryd.index import embed
out["memoryd.index.embed imported"] = rss()
d = Path(sys.argv[1])
tok = embed.load_tokenizer(d) if hasattr(embed, "load_tokenizer") else None
if tok is None:
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(d / "tokenizer.json"))
out["tokenizer loaded"] = rss()
del tok; gc.collect()
e, status = embed.load_embedder(None, d.parent)
out["embedder loaded (tokenizer + session + reference passages)"] = rss()
e.embed_queries(["login page baar baar redirect ho raha hai"])
out["after one query"] = rss()
e.embed_passages(["The deploy failed because the migration lock was held by a stale worker. " * 20] * 64)
out["after 64 passages of ~300 tokens"] = rss()
print(json.dumps(out))
"""


def smaps(pid: int) -> dict[str, float]:
    """Anonymous vs file-backed resident memory of a process, in MB (Linux smaps_rollup)."""
    out: dict[str, float] = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for row in f:
            key, _, rest = row.partition(":")
            if key in ("Rss", "Anonymous", "Shared_Clean", "Private_Clean", "Private_Dirty"):
                out[key] = int(rest.split()[0]) / 1024
    return out


def model_steps(report: Report) -> None:
    from memoryd.index.embed import load_embedder

    embedder, status = load_embedder(None, MODELS)
    if embedder is None:
        sys.exit(f"model unavailable: {status.detail}")
    env = {**os.environ, "MEMORYD_LOG_LEVEL": "error"}
    out = subprocess.run(
        [sys.executable, "-c", STEPS, str(embedder.model_dir)], capture_output=True, text=True, env=env
    )
    if out.returncode != 0:
        sys.exit(out.stderr[-3000:])
    steps = json.loads(out.stdout)
    report.raw["model_steps_mb"] = steps
    before = 0.0
    for step, mb in steps.items():
        report.row(f"fresh process: RSS {step}", mb, "MB", note=f"+{mb - before:.0f} MB")
        before = mb


def daemon_rss(
    report: Report, d: DaemonProcess, label: str, queries: list[str], env: dict, agents: int, n: int
):
    time.sleep(3)  # let start-up work settle
    idle, parts = d.rss_mb(), smaps(d.pid)
    report.row(
        f"daemon RSS idle, {label}",
        idle,
        "MB",
        note=f"anonymous {parts.get('Anonymous', 0):.0f} MB, file-backed "
        f"{parts.get('Rss', 0) - parts.get('Anonymous', 0):.0f} MB",
    )
    one = agent_shim(d.socket, env)
    times = []
    for q in (queries * 2)[:40]:
        t0 = time.perf_counter()
        shim_search(one, q)
        times.append((time.perf_counter() - t0) * 1000)
    one.close()
    alone = summary(times)
    report.row(f"one agent: search_briefs through the shim p50, {label}", alone["p50"], "ms", note="40 calls")
    report.row(f"one agent: search_briefs through the shim p95, {label}", alone["p95"], "ms")
    report.row(f"daemon RSS after 40 searches, {label}", d.rss_mb(), "MB")
    many = run_agents(d, env, agents, n, queries)
    report.raw[f"agents_{label}"] = many
    report.row(
        f"daemon RSS, {agents} agents x {n} searches, {label} (peak while searching)",
        many["daemon_rss_peak_mb"],
        "MB",
        note=f"at the end {many['daemon_rss_end_mb']:.0f} MB; errors {many['errors']} of {many['calls']}; "
        f"search p50 {many['latency_ms']['p50']:.0f} ms",
    )
    report.row(f"shim RSS after {n} searches, {label} (max of {agents})", many["shim_rss_mb"]["max"], "MB")
    time.sleep(3)
    report.row(f"daemon RSS idle after the agents, {label}", d.rss_mb(), "MB")


def first_search(socket: Path, env: dict, query: str, shim: list[str]) -> tuple[float, float]:
    """Spawn -> initialize -> initialized -> search_briefs answered (ms), and the shim's RSS then (MB)."""
    t0 = time.perf_counter()
    agent = Shim(socket, env, command=shim, pump=False).initialize(PROTOCOL)
    answer = shim_search(agent, query)
    elapsed = (time.perf_counter() - t0) * 1000
    if not answer_ok(answer):
        raise RuntimeError(f"search through the shim failed: {str(answer)[:300]}")
    rss = rss_mb(agent.pid)
    agent.close()
    return elapsed, rss


# how an agent can start the shim: what ``memoryd connect`` writes (``-m`` imports runpy), the console
# script, and the package's __main__.py run as a file, with and without site (``-S``: no .pth files read)
MAIN_FILE = str(REPO / "shim" / "memoryd_shim" / "__main__.py")
SHIMS = {
    "python -m memoryd_shim": [sys.executable, "-m", "memoryd_shim"],
    "memoryd-shim script": [str(SHIM)],
    "python <shim>/__main__.py": [sys.executable, MAIN_FILE],
    "python -S <shim>/__main__.py": [sys.executable, "-S", MAIN_FILE],
}


def new_agent_path(report: Report, d: DaemonProcess, env: dict, queries: list[str], runs: int) -> None:
    times: dict[str, list[float]] = {"python -c pass": [], "python -S -c pass": [], **{k: [] for k in SHIMS}}
    rss: list[float] = []
    floors = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -S -c pass": [sys.executable, "-S", "-c", "pass"],
    }
    for k in range(runs):  # interleaved, so the load moves all of them alike
        for name, argv in floors.items():
            t0 = time.perf_counter()
            subprocess.run(argv, check=True, env=env)
            times[name].append((time.perf_counter() - t0) * 1000)
        for name, argv in SHIMS.items():
            ms, mb = first_search(d.socket, env, queries[k % len(queries)], argv)
            times[name].append(ms)
            rss.append(mb)
    s = {name: summary(values) for name, values in times.items()}
    report.raw["first_search_ms"] = s
    f, fs = s["python -c pass"], s["python -S -c pass"]
    label = "spawn -> initialize -> first search_briefs answered"
    for name in SHIMS:
        floor, floor_label = (fs, "python -S -c pass") if "-S" in name else (f, "python -c pass")
        report.row(f"{label}, {name}: p50", s[name]["p50"], "ms", baseline=floor["p50"], baseline_label=floor_label,
                   target="<= 60 ms", met=s[name]["p50"] <= 60)  # fmt: skip
        report.row(
            f"{label}, {name}: p95", s[name]["p95"], "ms", baseline=floor["p95"], baseline_label=floor_label
        )
    report.row("shim RSS after its first search (max)", max(rss), "MB", target="<= 15 MB", met=max(rss) <= 15)


def main() -> int:
    parser = arg_parser(__doc__)
    parser.add_argument("--size", type=int, default=10000, help="briefs of the big board (0: skip it)")
    parser.add_argument("--no-empty", action="store_true", help="skip the empty board and the spawn figures")
    parser.add_argument("--agents", type=int, default=16)
    parser.add_argument("--searches", type=int, default=100, help="searches per agent")
    parser.add_argument("--spawns", type=int, default=40)
    parser.add_argument("--cache", type=Path, help="folder for the base vectors shared by benchmarks")
    parser.add_argument("--daemon-env", action="append", default=[], help="KEY=VALUE for memoryd serve")
    args = parser.parse_args()
    daemon_env = dict(kv.split("=", 1) for kv in args.daemon_env)
    if args.quick:
        args.size, args.searches, args.spawns = (
            min(args.size, 2000),
            min(args.searches, 30),
            min(args.spawns, 15),
        )
    quiet_env()
    report = Report("footprint", "Daemon memory and the new-agent path")
    model_steps(report)
    queries = dev_queries()
    env = {k: os.environ[k] for k in ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER") if k in os.environ}
    env["MEMORYD_NO_START"] = "1"
    work = Path(tempfile.mkdtemp(prefix="md-bench-footprint-"))
    try:
        empty_board, empty_index = work / "empty", work / "empty-index"
        (empty_board / "briefs").mkdir(parents=True)
        (empty_board / "tasks").mkdir()
        if not args.no_empty:
            with daemon(empty_board, empty_index, env=daemon_env) as d:
                d.wait_until(hybrid_ready, timeout=300)
                daemon_rss(report, d, "empty board", queries, env, args.agents, args.searches)
                new_agent_path(report, d, env, queries, args.spawns)
        if args.size:
            from memoryd.index.embed import load_embedder
            from memoryd.index.store import IndexStore

            board, index = work / "board", work / "index"
            write_board(board, args.size)
            base = load_base()
            embedder, _ = load_embedder(None, MODELS)
            with_vectors(base, embedder, args.cache)
            build_index(IndexStore(index), base, args.size)
            del embedder
            with daemon(board, index, env=daemon_env) as d:
                d.wait_until(engine_ready, timeout=600)
                first = d.summary()["raw"]["engine"].get("last_indexed_at")
                d.wait_until(hybrid_ready, timeout=600)
                wait_post_model_pass(d, first, timeout=300)
                daemon_rss(report, d, f"{args.size:,} briefs", queries, env, args.agents, args.searches)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report.finish(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
