"""Shared pieces of the benchmarks: percentiles, an RSS sampler, machine facts, one report format, the
plain SQLite FTS5 floor, board-v1's briefs copied into a live board, and the benchmarks' daemon (the
tests' :class:`support.daemon.DaemonProcess` with the model and this environment).

Every benchmark script builds a :class:`Report` (rows of figures, each with an optional baseline measured
in the same run, a target and whether it was met), prints it as a table, and with ``--out FILE`` writes
it as JSON for ``bench/run_all.py``, which renders the same rows into ``docs/benchmarks.md``.
Speed and memory figures are measured here only; tests assert behaviour, never a timing or a figure.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from support.daemon import DaemonProcess
from support.measure import rss_mb

REPO = Path(__file__).resolve().parents[1]
BOARD_V1 = REPO.parent / "shared" / "eval" / "board-v1" / "board"
DEV_QUERIES = BOARD_V1.parent / "dev.jsonl"
MODELS = REPO / ".cache" / "models"
OUT = REPO / "bench" / "out"  # raw results and the logs of failed daemons (git-ignored)


def quiet_env() -> None:
    """Environment for an in-process benchmark: no LanceDB warnings, few log lines, the repo's model cache."""
    os.environ.setdefault("LANCEDB_LOG", "error")
    os.environ.setdefault("MEMORYD_LOG_LEVEL", "error")
    os.environ.setdefault("MEMORYD_MODELS", str(MODELS))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from memoryd.logs import configure

    configure()  # the library logs JSON lines on stderr at MEMORYD_LOG_LEVEL


# --- statistics ---------------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (0-1) by nearest rank on the sorted values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def summary(values: list[float]) -> dict:
    """``{"n","p50","p95","p99","min","max","mean"}`` of ``values`` (same unit)."""
    return {
        "n": len(values),
        "p50": statistics.median(values),
        "p95": pct(values, 0.95),
        "p99": pct(values, 0.99),
        "min": min(values),
        "max": max(values),
        "mean": statistics.fmean(values),
    }


def timed(fn, *args) -> float:
    """Milliseconds ``fn(*args)`` took."""
    t = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - t) * 1000


# --- the floor: a plain SQLite FTS5 store -------------------------------------------------------------


class Floor:
    """The same calls on a plain SQLite FTS5 table: insert + commit per store (fsynced), BM25 search."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("CREATE VIRTUAL TABLE notes USING fts5(content, tags)")

    def store(self, items: list[tuple[str, str]]) -> None:
        self.db.execute("BEGIN")
        self.db.executemany("INSERT INTO notes(content, tags) VALUES (?, ?)", items)
        self.db.execute("COMMIT")

    def search(self, query: str, limit: int = 10) -> list:
        words = ["".join(ch for ch in w if ch.isalnum()) for w in query.split()]
        match = " OR ".join(f'"{w}"' for w in words if w)
        if not match:
            return []
        sql = "SELECT rowid FROM notes WHERE notes MATCH ? ORDER BY rank LIMIT ?"
        return self.db.execute(sql, (match, limit)).fetchall()


# --- briefs as an agent saves them ----------------------------------------------------------------------


class Briefs:
    """Copies of board-v1's briefs (new ids, same tasks) written into a live board, one folder each."""

    def __init__(self, board: Path) -> None:
        self.board = board
        self.sources = sorted(p for p in (BOARD_V1 / "briefs").iterdir() if p.is_dir())
        (board / "tasks").mkdir(exist_ok=True)
        (board / "briefs").mkdir(exist_ok=True)
        for task in (BOARD_V1 / "tasks").glob("*.json"):
            (board / "tasks" / task.name).write_bytes(task.read_bytes())
        self.count = 0

    def write(self, word: str = "") -> str:
        """Write the next copy; ``word`` goes into its said text. Returns its id."""
        src = self.sources[self.count % len(self.sources)]
        brief_id = f"b-20261201-{self.count:06x}"
        self.count += 1
        out = self.board / "briefs" / brief_id
        tmp = self.board / "briefs" / f".{brief_id}.tmp"
        shutil.copytree(src, tmp)
        doc = json.loads((src / "brief.json").read_text())
        (tmp / "brief.json").write_text(json.dumps({**doc, "id": brief_id}, ensure_ascii=False))
        if word:
            said = tmp / "said.txt"
            said.write_text(f"{said.read_text() if said.exists() else ''}\n({word})\n")
        tmp.rename(out)  # the folder appears whole, as a saving agent's does
        return brief_id


# --- the daemon and memory ---------------------------------------------------------------------------


def daemon(
    board: Path, index: Path, env: dict[str, str] | None = None, kind: type[DaemonProcess] = DaemonProcess
) -> DaemonProcess:
    """An unstarted ``memoryd serve`` with the default model (from ``MODELS``) on ``board`` and ``index``, in
    this process's environment (test tools off, info log, bytecode written as usual), in a short temporary
    folder removed at the end; used as ``with daemon(...) as d:`` (launch, SIGTERM at exit, the log kept in
    ``bench/out/`` after a failure); ``kind``: a subclass (another command line)."""
    inherited = {k: v for k, v in os.environ.items() if k not in ("MEMORYD_SOCKET", "MEMORYD_HOME")}
    env = {
        **inherited,
        "MEMORYD_MODELS": str(MODELS),
        "MEMORYD_LOG_LEVEL": "info",
        "MEMORYD_TEST_TOOLS": "",
        "PYTHONDONTWRITEBYTECODE": "",
        **(env or {}),
    }
    return kind.temporary(board=board, index=index, model="", env=env, keep_log_in=OUT)


class RssSampler:
    """Samples a process's RSS every ``every`` seconds in a thread; ``peak`` and ``last`` in MB."""

    def __init__(self, pid: int, every: float = 0.05) -> None:
        self.pid, self.every = pid, every
        self.peak = self.last = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.last = rss_mb(self.pid)
            except OSError:
                return
            self.peak = max(self.peak, self.last)
            self._stop.wait(self.every)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# --- the machine --------------------------------------------------------------------------------------


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def machine() -> dict:
    """CPU model, cores, RAM, OS and Python of this machine, and the load average now."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram_gb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram_gb = round(int(line.split()[1]) / (1 << 20), 1)
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "ram_gb": ram_gb,
        "os": f"{platform.system()} {platform.release()} ({platform.platform(terse=True)})",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "load_average": load_average(),
    }


# --- reports --------------------------------------------------------------------------------------------


@dataclass
class Row:
    """One figure. ``value``/``baseline`` are numbers in ``unit``; ``ratio`` = value / baseline."""

    figure: str
    value: float | int | str | None
    unit: str = ""
    baseline: float | int | None = None
    baseline_label: str = ""
    ratio: float | None = None
    target: str = ""
    met: bool | None = None
    note: str = ""


@dataclass
class Report:
    """What one benchmark script measured: rows for the doc, notes (one line each), raw numbers."""

    name: str
    title: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    raw: dict = field(default_factory=dict)
    load_before: list[float] = field(default_factory=load_average)
    load_after: list[float] = field(default_factory=list)
    seconds: float = 0.0
    started: float = field(default_factory=time.perf_counter)

    def row(
        self,
        figure: str,
        value,
        unit: str = "",
        *,
        baseline=None,
        baseline_label: str = "",
        target: str = "",
        met: bool | None = None,
        note: str = "",
    ) -> Row:
        ratio = None
        if isinstance(value, int | float) and isinstance(baseline, int | float) and baseline:
            ratio = value / baseline
        r = Row(figure, value, unit, baseline, baseline_label, ratio, target, met, note)
        self.rows.append(r)
        return r

    def note(self, text: str) -> None:
        self.notes.append(text)

    def finish(self, out: Path | None) -> None:
        """Print the table; write the JSON to ``out`` when given."""
        self.load_after = load_average()
        self.seconds = round(time.perf_counter() - self.started, 1)
        print()
        print(f"== {self.title} ==")
        for r in self.rows:
            print("  " + format_row_text(r))
        for n in self.notes:
            print(f"  note: {n}")
        print(f"  load average {self.load_before} -> {self.load_after}; {self.seconds} s")
        sys.stdout.flush()
        if out is not None:
            data = asdict(self)
            data.pop("started")
            out.write_text(json.dumps(data, indent=1, default=float))


def fmt(value, unit: str = "") -> str:
    """A number with sensible precision, plus its unit."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        text = f"{value:,}"
    elif abs(value) >= 100:
        text = f"{value:,.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    elif abs(value) >= 1:
        text = f"{value:.2f}"
    else:
        text = f"{value:.3f}"
    return f"{text} {unit}".strip()


def met_mark(met: bool | None) -> str:
    return {True: "met", False: "MISSED", None: ""}[met]


def format_row_text(r: Row) -> str:
    parts = [f"{r.figure:<58} {fmt(r.value, r.unit):>14}"]
    if r.baseline is not None:
        parts.append(f"  {r.baseline_label or 'baseline'} {fmt(r.baseline, r.unit)}")
    if r.ratio is not None:
        parts.append(f"  ratio {r.ratio:.2f}")
    if r.target:
        parts.append(f"  target {r.target} {met_mark(r.met)}")
    if r.note:
        parts.append(f"  ({r.note})")
    return "".join(parts)


def arg_parser(doc: str | None) -> argparse.ArgumentParser:
    """A parser with the flags every benchmark takes: ``--quick`` and ``--out FILE``."""
    parser = argparse.ArgumentParser(
        description=(doc or "").splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a smaller, faster run")
    parser.add_argument("--out", type=Path, help="write the report as JSON to this file")
    return parser


def dev_queries() -> list[str]:
    """The 120 labelled queries of board-v1 (English, Hinglish, Japanese, vague, error codes...)."""
    return [json.loads(line)["query"] for line in DEV_QUERIES.read_text().splitlines() if line.strip()]


def board_texts() -> list[str]:
    """board-v1's 200 briefs as the peers' harness stores them: title, summary, said, prompt, outcome."""
    texts = []
    for folder in sorted((BOARD_V1 / "briefs").iterdir()):
        meta = json.loads((folder / "brief.json").read_text(encoding="utf-8"))
        parts = [meta.get("title", ""), meta.get("summary", "")]
        files = ("said.txt", "prompt.md", "outcome.md")
        parts += [(folder / f).read_text(encoding="utf-8") for f in files if (folder / f).exists()]
        texts.append("\n\n".join(p.strip() for p in parts if p and p.strip()))
    return texts


def model_throughput(texts: list[str], batch: int = 50) -> float:
    """Passages per second of the model itself (this process; loaded once), in batches of ``batch``,
    each batch's buffers held for the next (``hold``, as the daemon embeds a stream of batches: 0-4 %
    faster than handing them back after each)."""
    embedder = _embedder()
    embedder.embed_passages(texts[:8], hold=True)  # warm
    t0 = time.perf_counter()
    for at in range(0, len(texts), batch):
        embedder.embed_passages(texts[at : at + batch], hold=True)
    rate = len(texts) / (time.perf_counter() - t0)
    embedder.release()
    return rate


@functools.cache
def _embedder():
    from memoryd.index.embed import load_embedder

    embedder, status = load_embedder(None, MODELS)
    if embedder is None:
        raise SystemExit(f"model unavailable: {status.detail}")
    return embedder


def wait_idle(pid: int, below: float = 0.05, window_s: float = 1.0, timeout_s: float = 30.0) -> float:
    """Wait until process ``pid`` uses less than ``below`` of a core over ``window_s`` (its index
    maintenance done), at most ``timeout_s``; returns the seconds waited. Without ``/proc`` (macOS): sleeps
    two seconds instead.

    The window is longer than the quiet gap after which the daemon starts the maintenance a stream of
    writes left (``memoryd.core.indexer.STREAM_GAP_S``, 0.5 s): with a window of that length, a window
    could end just before the maintenance began, and a figure measured next (the model alone) shared
    the cores with it (~530 ms of the daemon's CPU in the next 0.5 s after 20 batches at 10,000)."""
    stat = Path(f"/proc/{pid}/stat")
    t0 = time.perf_counter()
    if not stat.exists():
        time.sleep(2)
        return time.perf_counter() - t0

    def cpu() -> float:
        fields = stat.read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    while time.perf_counter() - t0 < timeout_s:
        c0 = cpu()
        time.sleep(window_s)
        if cpu() - c0 < below * window_s:
            break
    return time.perf_counter() - t0


def file_creation_ms(folder: Path, n: int = 20) -> float:
    """CPU milliseconds (this process, mostly the kernel's) to create, write and close one small file in a
    new folder ``folder``: the file system's share of each stored note. The files are left in place, as
    deleting them would make the next creations dearer on ext4 without a journal, which skips inodes freed
    in the last minutes and reads each one's deletion time to do so."""
    folder.mkdir(parents=True)
    c0 = time.process_time()
    for i in range(n):
        fd = os.open(folder / f"probe-{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, b"x" * 400)
        os.close(fd)
    return (time.process_time() - c0) / n * 1000
