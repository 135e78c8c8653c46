"""What the benchmarks read off a running :class:`~support.daemon.DaemonProcess`: readiness predicates over
its ``memoryd status --json`` object (for :meth:`~support.daemon.DaemonProcess.wait_until`) and a process's
RSS from ``/proc`` (Linux). Figures of record are measured in ``bench/`` only; tests use these to check a
mechanism (a freed buffer leaves the process), never a timing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from support.daemon import DaemonProcess


def engine_ready(status: dict[str, Any]) -> bool:
    """The board is reconciled with the index (searches answer, keyword-only until the model is warm)."""
    return (status.get("engine") or {}).get("state") == "ready"


def hybrid_ready(status: dict[str, Any]) -> bool:
    """The engine is ready and searches run hybrid (model loaded)."""
    model = status.get("model") or {}
    return status.get("search_mode") == "hybrid" and model.get("state") == "ready"


def wait_post_model_pass(
    d: DaemonProcess, first_indexed_at: float | None, timeout: float = 600.0
) -> float | None:
    """Seconds from launch until the daemon's pass over the index after the model got warm (a rescan, or a
    backfill of keyword-only records) is over: ``last_indexed_at`` moved past ``first_indexed_at`` (its value
    when the engine became ready) or the log says ``index_backfilled``. None if neither shows in time."""

    def done(status: dict[str, Any]) -> bool:
        if status["raw"]["engine"].get("last_indexed_at") != first_indexed_at:
            return True
        return '"index_backfilled"' in d.log()

    try:
        return d.wait_until(done, timeout=timeout, poll=0.1)
    except AssertionError:
        if d.proc is not None and d.proc.poll() is not None:
            raise
        return None


def proc_status(pid: int | str = "self") -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` (peak RSS) of a process in KiB, from /proc (Linux)."""
    out = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key = line.split(":", 1)[0]
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(line.split()[1])
    return out


def rss_mb(pid: int | str = "self") -> float:
    return proc_status(pid).get("VmRSS", 0) / 1024


def peak_rss_mb(pid: int | str = "self") -> float:
    return proc_status(pid).get("VmHWM", 0) / 1024
