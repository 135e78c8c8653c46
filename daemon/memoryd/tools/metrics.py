"""Per-tool call metrics since the daemon started: redacted telemetry only.

What is recorded per call: the tool name, success or failure, the duration, and the sizes in bytes of
the arguments and of the answer text. Never the arguments or the results themselves.

Latency percentiles come from a uniform random sample of every call since start (Vitter's
Algorithm R, "Random sampling with a reservoir", ACM TOMS 1985) of :data:`RESERVOIR` durations per
tool: exact while a tool has at most that many calls, an unbiased estimate after, in constant memory.
Percentiles use the nearest-rank method.

The one process-wide recorder is :data:`METRICS`; the MCP tool boundary (:mod:`memoryd.serve.app`) feeds
it, ``get_memory_core_tool_metrics`` reads it.
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


@dataclass
class _Tool:
    calls: int = 0
    failures: int = 0
    timed: int = 0
    total_ms: float = 0.0
    max_ms: float = 0.0
    arg_bytes: int = 0
    result_bytes: int = 0
    sample: list[float] = field(default_factory=list)
    last_call_at: float = 0.0


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
            t.last_call_at = time.time()
            if duration_ms is None:
                return
            t.timed += 1
            t.total_ms += duration_ms
            t.max_ms = max(t.max_ms, duration_ms)
            if len(t.sample) < self._reservoir:
                t.sample.append(duration_ms)
            else:
                slot = self._rng.randrange(t.timed)
                if slot < self._reservoir:
                    t.sample[slot] = duration_ms

    def snapshot(self) -> dict[str, Any]:
        """``{"since", "uptime_s", "calls", "failures", "tools": {name: {"calls","failures","p50_ms",
        "p95_ms","mean_ms","max_ms","arg_bytes","result_bytes"}}}``, tools sorted by name."""
        with self._lock:
            items = {name: (t, sorted(t.sample)) for name, t in self._tools.items()}
            tools = {
                name: {
                    "calls": t.calls,
                    "failures": t.failures,
                    "p50_ms": round(percentile(s, 50), 2),
                    "p95_ms": round(percentile(s, 95), 2),
                    "mean_ms": round(t.total_ms / t.timed, 2) if t.timed else 0.0,
                    "max_ms": round(t.max_ms, 2),
                    "arg_bytes": t.arg_bytes,
                    "result_bytes": t.result_bytes,
                }
                for name, (t, s) in sorted(items.items())
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
