"""Query latency in-process at 10,000 and 100,000 briefs: hybrid search vs plain BM25.

    .venv/bin/python bench/bench_search.py [--sizes 10000,100000] [--passes 2] [--quick] [--out FILE]

The index is a replica of board-v1 (200 real briefs; see ``bench/_replica.py``): copies of the real
records with new ids and the vectors already computed for the originals, written straight into an
``IndexStore`` with batched ``upsert`` and one ``optimize()`` -- embedding 100,000 briefs would take hours.
Queries are the 120 labelled queries of ``board-v1/dev.jsonl`` (English, Hinglish, Japanese, vague,
error codes). For every query, hybrid ``search(store, embedder, q)`` and the baseline ``search(store,
None, q)`` (keyword-only mode: plain BM25 on the same records) run back to back, in alternating order,
so both see the same machine load. Hybrid includes embedding the query. A further pass times the pieces
of a hybrid search (query embedding, BM25, the nearest-neighbour scans, row look-ups).
"""

from __future__ import annotations

import functools
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _replica import build_index, load_base, with_vectors
from _util import MODELS, Report, arg_parser, dev_queries, quiet_env, summary
from support.measure import rss_mb

TARGETS_MS = {10_000: 20.0, 100_000: 50.0}


def timed_query(fn) -> tuple[float, float]:
    """(wall ms, process CPU ms: all threads) of one call."""
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000


def measure(store, embedder, queries: list[str], passes: int) -> dict:
    from memoryd.index.search import search
    from memoryd.index.searcher import SearchQuery

    for q in queries[:10]:  # warm both paths (caches, the FTS index, onnxruntime)
        search(store, embedder, SearchQuery(q))
        search(store, None, SearchQuery(q))
    wall = {"hybrid": [], "bm25": []}
    cpu = {"hybrid": [], "bm25": []}
    n = 0
    for _ in range(passes):
        for q in queries:
            order = (("hybrid", embedder), ("bm25", None))
            for mode, emb in order if n % 2 == 0 else order[::-1]:
                w, c = timed_query(lambda emb=emb, q=q: search(store, emb, SearchQuery(q)))
                wall[mode].append(w)
                cpu[mode].append(c)
            n += 1
    return {"wall": {m: summary(v) for m, v in wall.items()}, "cpu": {m: summary(v) for m, v in cpu.items()}}


def breakdown(store, embedder, queries: list[str]) -> dict[str, float]:
    """Milliseconds per hybrid query spent in each piece (means over the queries), by wrapping the methods
    of these two instances only. BM25 runs in LanceDB's threads while the query is embedded, so its piece
    is the wait left after embedding and the nearest neighbours ("keyword wait"); "keyword alone" is the
    same BM25 query run by itself afterwards (not part of the total)."""
    from memoryd.index.columns import Filter
    from memoryd.index.search import search
    from memoryd.index.searcher import SearchQuery
    from memoryd.index.terms import term_string

    spent: dict[str, float] = {}
    depth = [0]  # only the outermost wrapped call counts: keyword() waits on keyword_start()

    def add(name: str, start: float) -> None:
        spent[name] = spent.get(name, 0.0) + (time.perf_counter() - start) * 1000

    def wrap(obj, name: str, label: str | None = None) -> None:
        fn = getattr(obj, name)

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            depth[0] += 1
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    add(label or name, start)

        setattr(obj, name, timed)

    class TimedFuture:
        def __init__(self, fut) -> None:
            self.fut = fut

        def result(self, timeout=None):
            start = time.perf_counter()
            try:
                return self.fut.result(timeout)
            finally:
                add("keyword wait", start)

    start_keyword = store.keyword_start

    def keyword_start(*args, **kwargs):
        start = time.perf_counter()
        try:
            return TimedFuture(start_keyword(*args, **kwargs))
        finally:
            add("keyword submit", start)

    store.keyword_start = keyword_start
    pieces = ("nearest_by", "rows", "vectors", "count")
    for name in pieces:
        wrap(store, name)
    wrap(embedder, "embed_queries")
    names = ("embed_queries", "keyword submit", "keyword wait", *pieces)
    per_query: dict[str, list[float]] = {}
    totals, alone = [], []
    for q in queries:
        spent.clear()
        start = time.perf_counter()
        search(store, embedder, SearchQuery(q))
        totals.append((time.perf_counter() - start) * 1000)
        for name in names:
            per_query.setdefault(name, []).append(spent.get(name, 0.0))
    for name in ("keyword_start", *pieces):
        delattr(store, name)
    delattr(embedder, "embed_queries")
    for q in queries:
        terms = term_string(q, query=True)
        start = time.perf_counter()
        store.keyword(terms, Filter(), 50)
        alone.append((time.perf_counter() - start) * 1000)
    out = {name: statistics.fmean(v) for name, v in per_query.items()}
    out["total"] = statistics.fmean(totals)
    out["other (python: redact, terms, scoring)"] = max(
        0.0, out["total"] - sum(v for k, v in out.items() if k != "total")
    )
    out["keyword alone"] = statistics.fmean(alone)
    return out


def main() -> int:
    parser = arg_parser(__doc__)
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated brief counts")
    parser.add_argument(
        "--passes", type=int, default=2, help="passes over the 120 queries per size (one above 10,000)"
    )
    parser.add_argument("--cache", type=Path, help="folder for the base vectors shared by benchmarks")
    parser.add_argument("--tmp", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args()
    quiet_env()
    from memoryd.index.embed import load_embedder
    from memoryd.index.store import IndexStore

    sizes = [int(s) for s in args.sizes.split(",")]
    passes, queries = args.passes, dev_queries()
    if args.quick:
        sizes, passes, queries = [10_000], 1, queries[::2]
    report = Report("search", "Search latency in-process")

    embedder, status = load_embedder(None, MODELS)
    if embedder is None:
        sys.exit(f"model unavailable: {status.detail}")
    base = load_base()
    with_vectors(base, embedder, args.cache)
    report.note(
        f"indexes are replicas of board-v1's {len(base.records)} real briefs (copies with new ids and the "
        "originals' vectors, written with batched IndexStore.upsert + optimize, not embedded)"
    )
    report.note(
        f"queries: {len(queries)} of board-v1/dev.jsonl x {passes} pass(es) (1 above 10,000 briefs); hybrid includes embedding the "
        "query; BM25 = search(..., embedder=None), keyword-only mode, same records, same run, interleaved"
    )
    for size in sizes:
        folder = Path(tempfile.mkdtemp(prefix="md-bench-search-", dir=args.tmp))
        try:
            start = time.perf_counter()
            store = IndexStore(folder / "index")
            build_index(store, base, size)
            build_s = time.perf_counter() - start
            print(f"{size:,} briefs: replica index written and optimised in {build_s:.1f} s", flush=True)
            m = measure(store, embedder, queries, passes if size <= 10_000 else 1)
            parts = breakdown(store, embedder, queries[: 30 if args.quick or size > 10_000 else 60])
            report.raw[str(size)] = {"build_s": build_s, **m, "breakdown_ms": parts, "rss_mb": rss_mb()}
            h, b = m["wall"]["hybrid"], m["wall"]["bm25"]
            target = TARGETS_MS.get(size)
            report.row(
                f"{size:,} briefs: hybrid query p50",
                h["p50"],
                "ms",
                baseline=b["p50"],
                baseline_label="BM25",
                target=f"<= {target:g} ms" if target else "",
                met=h["p50"] <= target if target else None,
            )
            report.row(
                f"{size:,} briefs: hybrid query p95", h["p95"], "ms", baseline=b["p95"], baseline_label="BM25"
            )
            report.row(
                f"{size:,} briefs: CPU per hybrid query p50 (all threads)",
                m["cpu"]["hybrid"]["p50"],
                "ms",
                baseline=m["cpu"]["bm25"]["p50"],
                baseline_label="BM25",
            )
            report.row(f"{size:,} briefs: replica index write + optimize", build_s, "s")
            top = sorted(
                ((v, k) for k, v in parts.items() if k not in ("total", "keyword alone")), reverse=True
            )
            report.note(
                f"{size:,} briefs, where a hybrid query's {parts['total']:.0f} ms go (mean per piece): "
                + ", ".join(f"{k} {v:.1f} ms" for v, k in top)
                + f"; BM25 alone (overlapped with the embedding in a search) {parts['keyword alone']:.1f} ms"
            )
            report.row(
                f"{size:,} briefs: this process's RSS after the searches (model, index, replica build)",
                rss_mb(),
                "MB",
            )
            del store
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    report.finish(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
