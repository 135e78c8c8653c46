"""Memories through a real ``memoryd serve`` with the model and real ``memoryd-shim`` agents.

    .venv/bin/python bench/bench_memories.py [--size 10000] [--big] [--stores 200] [--batches 10]
                                             [--searches 200] [--recalls 100] [--quick] [--out FILE]

For each board size (``--size``, plus 100,000 with ``--big``) a board of synthetic memories is written
straight to disk (``memories/<hash>.md`` through ``memoryd.kinds.memories.files.render_memory``; one in five also
links to the next two of its cluster of five, so recall has edges to follow), then a daemon is started on
it with the default model and an empty index, and the time until every memory is indexed *with its vector*
is measured (the daemon reconciles keyword-only, then the model embeds in chunks). Then, through
``memoryd-shim --tools memories --no-start`` subprocesses speaking raw MCP lines:

* ``store_memory`` one at a time and ``store_memories`` in batches of 50 (new, distinct contents):
  memories/s, and per-call p50/p95;
* ``search_memories`` (queries of the same vocabulary, default limit) p50/p95;
* ``recall`` with ``depth`` 2 p50/p95;
* the daemon's RSS after indexing and its peak while the calls ran.

Not in ``bench/run_all.py``: at 10,000 memories one run took 12 minutes on 2 shared cores (load 6-9),
10 of them embedding the board; 100,000 (``--big``) needs roughly ten times that.

The memories are synthetic (templates over a developer vocabulary plus a reference number), so their words
repeat more than real notes do: keyword posting lists are longer than on a real board of that size.
"""

from __future__ import annotations

import itertools
import json
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _util import MODELS, Report, RssSampler, arg_parser, daemon, quiet_env, summary
from bench_daemon import PROTOCOL, answer_ok
from support.briefs import Shim
from support.daemon import DaemonProcess
from support.measure import engine_ready, hybrid_ready

BATCH = 50
CLUSTER = 5

COMPONENTS = (
    "billing service",
    "checkout page",
    "auth middleware",
    "nightly export",
    "search indexer",
    "webhook relay",
    "invoice PDF renderer",
    "feature flag client",
    "payments gateway",
    "CSV importer",
    "email digest job",
    "session store",
    "rate limiter",
    "GraphQL schema",
    "mobile push sender",
    "admin dashboard",
    "audit log",
    "cron scheduler",
    "image resizer",
    "onboarding wizard",
    "Kafka consumer",
    "Postgres replica",
    "Redis cache",
    "S3 uploader",
    "OAuth callback",
    "docs site build",
    "CI pipeline",
    "staging deploy",
    "load balancer",
    "metrics exporter",
    "tax calculator",
    "currency converter",
    "order state machine",
    "refund flow",
    "inventory sync",
    "shipping label API",
    "customer portal",
    "SSO login",
    "notification center",
    "data warehouse loader",
    "ML scoring service",
    "translation pipeline",
    "video transcoder",
    "chat widget",
)
TECH = (
    "Go 1.22",
    "Python 3.12",
    "Node 20",
    "Rust",
    "TypeScript",
    "PostgreSQL 16",
    "Redis 7",
    "Kafka",
    "RabbitMQ",
    "Terraform",
    "Kubernetes",
    "Helm",
    "Docker",
    "GitHub Actions",
    "Sentry",
    "Datadog",
    "OpenTelemetry",
    "gRPC",
    "protobuf",
    "pnpm",
    "Poetry",
    "uv",
    "Vite",
    "Next.js",
    "Django",
    "FastAPI",
    "SQLAlchemy",
    "Prisma",
    "Celery",
    "Temporal",
    "Airflow",
    "dbt",
    "Snowflake",
    "BigQuery",
    "Elasticsearch",
    "LanceDB",
    "SQLite",
    "nginx",
    "Envoy",
    "Cloudflare Workers",
)
CONDITIONS = (
    "the customer has no invoices",
    "the queue is backed up",
    "a retry fires twice",
    "the token expires mid-request",
    "the file has a UTF-8 BOM",
    "two workers run at once",
    "the cache is cold",
    "the clock skews by a minute",
    "the payload is over 10 MB",
    "the replica lags",
    "the locale is Japanese",
    "DST changes overnight",
    "the upstream returns 429",
    "the job is cancelled halfway",
    "the disk is nearly full",
    "a migration is still running",
    "the user has two accounts",
    "the webhook secret rotates",
    "IPv6 is enabled",
    "the connection pool is exhausted",
    "the feature flag is off",
    "the batch is empty",
)
TEMPLATES = (
    ("fact", "The {c} times out when {x}; raising the limit only hides it."),
    ("decision", "We decided to move the {c} to {t} because {x} kept breaking the old setup."),
    ("lesson", "Lesson: pin the {t} version in the {c}, an unpinned upgrade broke it when {x}."),
    ("error", "Error in the {c}: a null reference when {x}; fixed by guarding the lookup."),
    ("plan", "Plan: split the {c} into two jobs on {t} so that {x} no longer blocks everything."),
    ("reflection", "The {c} outage was ours: nobody tested what happens when {x}."),
    ("general", "Ask the platform team before touching the {c}; it runs on {t} with custom patches."),
    ("fact", "The {c} reads its settings from {t} at start; changing them needs a restart when {x}."),
    ("decision", "Chose {t} for the {c} over the alternatives; it handles the case where {x}."),
    ("lesson", "Always add a test for the {c} covering the case where {x}."),
)
QUESTIONS = (
    "why does the {c} time out",
    "what did we decide about the {c}",
    "{t} version problem in the {c}",
    "{c} breaks when {x}",
    "plan for the {c}",
    "who owns the {c}",
    "{t} settings restart",
    "null reference {c}",
)
TAGS = ("ops", "backend", "frontend", "data", "infra", "payments", "security", "ci", "perf", "oncall")


def memory_text(rng: random.Random, n: int) -> tuple[str, str, list[str]]:
    """(memory_type, content, tags) of synthetic memory ``n`` (distinct by its reference number)."""
    mtype, template = TEMPLATES[rng.randrange(len(TEMPLATES))]
    text = template.format(c=rng.choice(COMPONENTS), t=rng.choice(TECH), x=rng.choice(CONDITIONS))
    return mtype, f"{text} (ref MEM-{n})", rng.sample(TAGS, rng.randrange(0, 3))


def memory_items(seed: int = 11) -> Callable[[], dict]:
    """A function that returns the next synthetic memory's ``store_memory`` arguments on each call
    (memory 0, 1, 2, ... of :func:`memory_text` with ``random.Random(seed)``; "bench" when it has no tag)."""
    rng, made = random.Random(seed), itertools.count()

    def item() -> dict:
        mtype, content, tags = memory_text(rng, next(made))
        return {"content": content, "tags": tags or ["bench"], "memory_type": mtype, "importance": 3}

    return item


def queries(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [
        rng.choice(QUESTIONS).format(c=rng.choice(COMPONENTS), t=rng.choice(TECH), x=rng.choice(CONDITIONS))
        for _ in range(count)
    ]


def write_board(board: Path, size: int, seed: int = 1) -> float:
    """``size`` memory files (plus ``tasks/`` and ``briefs/``) written directly; returns the seconds taken."""
    from memoryd.kinds.briefs.writer import ensure_board
    from memoryd.kinds.memories.files import Memory, Relation, render_memory

    t0 = time.perf_counter()
    ensure_board(board)
    folder = board / "memories"
    folder.mkdir(mode=0o700, exist_ok=True)
    rng = random.Random(seed)
    made = []
    for n in range(size):
        mtype, content, tags = memory_text(rng, n)
        created = f"2026-{1 + n % 11:02d}-{1 + n % 28:02d}T{n % 24:02d}:00:00Z"
        made.append(
            Memory.new(content, tags=tuple(tags), memory_type=mtype, importance=n % 11, created_at=created)
        )
    for start in range(0, size, CLUSTER):
        cluster = made[start : start + CLUSTER]
        for i, memory in enumerate(cluster):
            links = tuple(
                Relation(f"{start + i:016x}{j:016x}", "related_to", cluster[j].id, memory.created_at)
                for j in (i + 1, i + 2)
                if j < len(cluster)
            )
            if links:
                cluster[i] = memory.with_(relations=links)
        for memory in cluster:
            (folder / f"{memory.id}.md").write_text(render_memory(memory), encoding="utf-8")
    return time.perf_counter() - t0


class MemShim(Shim):
    """One agent's ``memoryd-shim --tools memories --no-start``, initialised; tool calls by name."""

    def __init__(self, socket: Path, tools: str = "memories") -> None:
        super().__init__(socket, tools=tools, pump=False)
        self.initialize(PROTOCOL)

    def call_tool(self, name: str, arguments: dict) -> dict:
        return self.request("tools/call", {"name": name, "arguments": arguments})

    def tool(self, name: str, arguments: dict) -> dict:
        """The tool's ``structuredContent`` (``{"ok": ..., "result": ...}``); raises on a failed call."""
        answer = self.call_tool(name, arguments)
        if not answer_ok(answer):
            raise RuntimeError(f"{name} failed: {json.dumps(answer)[:500]}")
        result = answer["result"]
        structured = result.get("structuredContent")
        if structured is None:
            structured = json.loads(result["content"][0]["text"])
        if structured.get("ok") is False:
            raise RuntimeError(f"{name} answered an error: {structured}")
        return structured


def indexed(d: DaemonProcess, size: int):
    """Ready check: the engine is ready, the model warm, and the daemon's backfill has given at least ``size``
    records their vectors (its ``index_backfilled`` log line; the start-up reconcile writes keyword-only
    records while the model loads)."""

    def ready(status: dict) -> bool:
        return engine_ready(status) and hybrid_ready(status) and backfilled(d) >= size

    return ready


def backfilled(d: DaemonProcess) -> int:
    """Records embedded by the daemon's backfill passes so far (sum of its ``index_backfilled`` lines)."""
    total = 0
    for raw in d.log_path.read_text(errors="replace").splitlines():
        if '"index_backfilled"' in raw:
            try:
                total += int(json.loads(raw).get("updated", 0))
            except ValueError:
                continue
    return total


def prebuild_index(board: Path, index: Path, sample: int = 500) -> float:
    """Write the index of ``board`` in-process with *replica* vectors (the real vectors of ``sample``
    memories, repeated), so the daemon starts on a complete index and nothing is embedded. Latency and
    RSS only: the meaning half of these searches is not meaningful. Returns the seconds it took."""
    import numpy as np

    from memoryd.index.embed import load_embedder
    from memoryd.index.store import IndexStore
    from memoryd.kinds.memories.source import source

    start = time.perf_counter()
    embedder, status = load_embedder(None, MODELS)
    if embedder is None:
        raise SystemExit(f"model unavailable: {status.detail}")
    records = source(board).load_all().records
    base = embedder.embed_passages([r.embed_text for r in records[:sample]])
    store = IndexStore(index)
    for at in range(0, len(records), 5000):
        chunk = records[at : at + 5000]
        vecs = np.stack([base[(at + i) % len(base)] for i in range(len(chunk))]).astype(np.float32)
        store.upsert(chunk, vecs, embedder.name)
    store.optimize()
    return time.perf_counter() - start


def complete(d: DaemonProcess, size: int):
    """Ready check for a pre-built index: engine and model ready, every memory in the index."""

    def ready(status: dict) -> bool:
        counts = ((status.get("raw") or {}).get("engine") or {}).get("records") or status.get("records") or 0
        return engine_ready(status) and hybrid_ready(status) and counts >= size

    return ready


def bench_size(report: Report, size: int, args, work: Path) -> None:
    board, index = work / f"board-{size}", work / f"index-{size}"
    secs = write_board(board, size)
    report.row(f"{size:,} memories: board written directly", secs, "s", note=f"{size / secs:,.0f} files/s")
    print(f"{size:,} memory files written in {secs:.1f} s", flush=True)
    replica = args.replica_vectors or (size >= 100_000 and args.big)
    if replica:
        built = prebuild_index(board, index)
        report.row(f"{size:,} memories: index pre-built in-process (replica vectors)", built, "s")
        print(f"index of {size:,} pre-built with replica vectors in {built:.1f} s", flush=True)
    try:
        with daemon(board, index) as d:
            d.wait_until(engine_ready, timeout=args.timeout)
            ready = complete(d, size) if replica else indexed(d, size)
            ready_s = d.wait_until(ready, timeout=args.timeout, poll=0.5)
            rss_idle = d.rss_mb()
            report.row(
                f"{size:,} memories: spawn -> all indexed with vectors"
                + (" (index pre-built: the start-up reconcile only)" if replica else ""),
                ready_s,
                "s",
                note="" if replica else f"{size / ready_s:,.0f} memories/s from an empty index",
            )
            print(f"daemon indexed {size:,} memories in {ready_s:.1f} s (RSS {rss_idle:.0f} MB)", flush=True)
            shim = MemShim(d.socket)
            try:
                with RssSampler(d.pid) as sampler:
                    run_calls(report, shim, size, args)
            finally:
                shim.close()
            report.row(
                f"{size:,} memories: daemon RSS idle / peak during the calls",
                f"{rss_idle:.0f} / {sampler.peak:.0f} MB",
            )
            report.raw[f"rss_{size}"] = {"idle_mb": rss_idle, "peak_mb": sampler.peak}
    finally:
        shutil.rmtree(board, ignore_errors=True)
        shutil.rmtree(index, ignore_errors=True)


def run_calls(report: Report, shim: MemShim, size: int, args) -> None:
    rng = random.Random(size)
    fresh = (memory_text(rng, size * 10 + n) for n in itertools.count())

    def item() -> dict:
        mtype, content, tags = next(fresh)
        return {
            "content": content + " (stored)",
            "tags": tags or ["bench"],
            "memory_type": mtype,
            "importance": 3,
        }

    single = []
    t0 = time.perf_counter()
    for _ in range(args.stores):
        t = time.perf_counter()
        shim.tool("store_memory", item())
        single.append((time.perf_counter() - t) * 1000)
    single_rate = args.stores / (time.perf_counter() - t0)
    batches = []
    t0 = time.perf_counter()
    for _ in range(args.batches):
        t = time.perf_counter()
        answer = shim.tool("store_memories", {"items": [item() for _ in range(BATCH)]})
        batches.append((time.perf_counter() - t) * 1000)
        result = answer.get("result", answer)
        if result.get("failed"):
            raise RuntimeError(f"store_memories failed items: {result}")
    batch_rate = args.batches * BATCH / (time.perf_counter() - t0)
    s1, sb = summary(single), summary(batches)
    report.row(
        f"{size:,}: store_memory one at a time",
        single_rate,
        "memories/s",
        note=f"per call p50 {s1['p50']:.1f} ms, p95 {s1['p95']:.1f} ms, {args.stores} calls",
    )
    report.row(
        f"{size:,}: store_memories, batches of {BATCH}",
        batch_rate,
        "memories/s",
        baseline=single_rate,
        baseline_label="one at a time",
        note=f"per batch p50 {sb['p50']:.0f} ms, p95 {sb['p95']:.0f} ms, {args.batches} batches",
    )
    qs = queries(args.searches + 10)
    for q in qs[:10]:  # warm
        shim.tool("search_memories", {"query": q})
    search = []
    empty = 0
    for q in qs[10:]:
        t = time.perf_counter()
        answer = shim.tool("search_memories", {"query": q})
        search.append((time.perf_counter() - t) * 1000)
        result = answer.get("result", answer)
        hits = result if isinstance(result, list) else result.get("memories") or result.get("results") or []
        empty += not hits
    ss = summary(search)
    report.row(
        f"{size:,}: search_memories p50", ss["p50"], "ms", note=f"{len(search)} queries, {empty} with no hit"
    )
    report.row(f"{size:,}: search_memories p95", ss["p95"], "ms")
    recall = []
    for q in qs[10 : 10 + args.recalls]:
        t = time.perf_counter()
        shim.tool("recall", {"query": q, "depth": 2})
        recall.append((time.perf_counter() - t) * 1000)
    sr = summary(recall)
    report.row(
        f"{size:,}: recall depth 2 p50", sr["p50"], "ms", note=f"p95 {sr['p95']:.0f} ms, {len(recall)} calls"
    )
    report.raw[f"size_{size}"] = {
        "store_ms": s1,
        "batch_ms": sb,
        "search_ms": ss,
        "recall_ms": sr,
        "store_per_s": single_rate,
        "batch_per_s": batch_rate,
    }


def main() -> int:
    parser = arg_parser(__doc__)
    parser.add_argument("--size", type=int, default=10_000, help="memories on the board (default 10,000)")
    parser.add_argument(
        "--big", action="store_true", help="also 100,000 memories (embedding them takes long)"
    )
    parser.add_argument("--stores", type=int, default=200, help="store_memory calls")
    parser.add_argument("--batches", type=int, default=10, help=f"store_memories calls of {BATCH}")
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--recalls", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for the indexing")
    parser.add_argument(
        "--replica-vectors",
        action="store_true",
        help="pre-build the index with repeated real vectors instead of letting the daemon embed the board "
        "(latency and RSS only; --big always does this for 100,000)",
    )
    args = parser.parse_args()
    if args.quick:
        args.size = min(args.size, 2000)
        args.stores, args.batches, args.searches, args.recalls = 50, 4, 50, 30
    quiet_env()
    report = Report("memories", "Memories through the daemon and shims")
    work = Path(tempfile.mkdtemp(prefix="md-bench-mem-"))
    try:
        for size in [args.size, *([100_000] if args.big and args.size != 100_000 else [])]:
            bench_size(report, size, args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report.note(
        "memories are synthetic (developer-note templates with a reference number): distinct, but their words "
        "repeat more than real notes; one in five links to the next two of its cluster of five"
    )
    report.finish(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
