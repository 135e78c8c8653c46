"""The tool boundary's call metrics: per tool, calls, failures, sizes and latency percentiles.

Redacted telemetry only: per call, the tool name, success or failure, the duration, and the sizes in bytes
of the arguments and of the answer text; never the arguments or the results themselves. Latency
percentiles come from a uniform random sample of every call since start (Vitter's Algorithm R, "Random
sampling with a reservoir", ACM TOMS 1985) of :data:`RESERVOIR` durations per tool: exact while a tool has
at most that many calls, an unbiased estimate after, in constant memory. Percentiles use the nearest-rank
method. The one process-wide recorder is :data:`METRICS`: the tool boundary (:mod:`memoryd.serve.app`)
feeds it and hands it to every call (:attr:`memoryd.tools.registry.ToolContext.metrics`), where
``get_memory_core_tool_metrics`` reads it.
"""

from __future__ import annotations

import math
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

RESERVOIR = 2048


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile ``p`` (0-100) of already sorted values; 0.0 for no values."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


@dataclass(slots=True)
class _Latency:
    """Durations in ms of one tool's calls that ran: how many, their sum, maximum and reservoir sample."""

    timed: int = 0
    total_ms: float = 0.0
    max_ms: float = 0.0
    sample: list[float] = field(default_factory=list)

    def add(self, duration_ms: float, reservoir: int, rng: random.Random) -> None:
        self.timed += 1
        self.total_ms += duration_ms
        self.max_ms = max(self.max_ms, duration_ms)
        if len(self.sample) < reservoir:
            self.sample.append(duration_ms)
        elif (slot := rng.randrange(self.timed)) < reservoir:
            self.sample[slot] = duration_ms

    def figures(self) -> dict[str, float]:
        """``{"p50_ms", "p95_ms", "mean_ms", "max_ms"}``, each rounded to 0.01 ms (0.0 for no calls)."""
        s = sorted(self.sample)
        return {
            "p50_ms": round(percentile(s, 50), 2),
            "p95_ms": round(percentile(s, 95), 2),
            "mean_ms": round(self.total_ms / self.timed, 2) if self.timed else 0.0,
            "max_ms": round(self.max_ms, 2),
        }


@dataclass(slots=True)
class _Tool:
    """One tool's calls since start: all of them, the failed ones, argument and result bytes, durations."""

    calls: int = 0
    failures: int = 0
    arg_bytes: int = 0
    result_bytes: int = 0
    latency: _Latency = field(default_factory=_Latency)


class ToolMetrics:
    """Thread-safe counters and latency samples per tool name."""

    def __init__(self, reservoir: int = RESERVOIR, seed: int | None = None) -> None:
        self.started_at = time.time()
        self._reservoir = reservoir
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._tools: dict[str, _Tool] = {}

    def record(
        self, tool: str, ok: bool, duration_ms: float | None, arg_bytes: int = 0, result_bytes: int = 0
    ) -> None:
        """Count one finished call of ``tool``. ``duration_ms`` None: the call never ran (its arguments
        broke the input schema); it counts as a failure but stays out of the latency figures."""
        with self._lock:
            t = self._tools.setdefault(tool, _Tool())
            t.calls += 1
            t.failures += 0 if ok else 1
            t.arg_bytes += arg_bytes
            t.result_bytes += result_bytes
            if duration_ms is not None:
                t.latency.add(duration_ms, self._reservoir, self._rng)

    def snapshot(self) -> dict[str, Any]:
        """``{"since", "uptime_s", "calls", "failures", "tools": {name: {"calls","failures","p50_ms",
        "p95_ms","mean_ms","max_ms","arg_bytes","result_bytes"}}}``, tools sorted by name."""
        with self._lock:
            tools = {
                name: {
                    "calls": t.calls,
                    "failures": t.failures,
                    **t.latency.figures(),
                    "arg_bytes": t.arg_bytes,
                    "result_bytes": t.result_bytes,
                }
                for name, t in sorted(self._tools.items())
            }
        return {
            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started_at)),
            "uptime_s": round(time.time() - self.started_at, 1),
            "calls": sum(t["calls"] for t in tools.values()),
            "failures": sum(t["failures"] for t in tools.values()),
            "tools": tools,
        }


#: The daemon's recorder (one per process).
METRICS = ToolMetrics()
