"""A new user's first agent: no daemon running, the shim starts ``memoryd serve``; how long until it answers.

    .venv/bin/python bench/bench_coldstart.py [--runs 10] [--briefs] [--bytecode-only] [--quick] [--out FILE]

Each run is a fresh ``MEMORYD_HOME`` (no board, no index yet; the model already built in ``.cache/models``,
as after the first start built it) and a fresh socket, once for each install (:data:`INSTALLS`): with
the bytecode compiled (``make setup``), and without any (a fresh ``PYTHONPYCACHEPREFIX``: the first start
after an install that compiled nothing, where Python compiles the SDK, LanceDB and memoryd from source). The real ``memoryd-shim`` console script is started
*without* ``--no-start``, so it finds no daemon and spawns one, as an agent CLI's first start does. From the
shim's spawn (wall time, p50/p95 over the runs):

* ``initialize`` answered, then ``tools/list`` answered (what an agent CLI's start-up timeout covers:
  Codex ``startup_timeout_sec``, Claude Code ``MCP_TIMEOUT``);
* the first ``search_briefs`` answered, and in which mode (``keyword`` while the model loads);
* from the daemon's own log (its stderr, ``<state>/memoryd-spawned.log``): ``starting`` (the interpreter,
  the command line and the settings are up), ``listening`` (the socket is served), ``engine_ready`` and
  ``model_ready``, each from the shim's spawn.

Floors, interleaved with the runs so that the load moves them alike: ``python -c pass``, ``python -c
"import mcp.types"`` and ``python -c "import mcp.server.lowlevel"`` (the SDK half a handshake needs), and
``python -c "import lancedb"`` (what the engine's start waits for, in the background). The machine's load
average is printed: on a shared machine read the ratios to the floors, not the absolute figures.

``--briefs`` copies board-v1 (200 briefs) into the new board, so the first search has briefs to find (the
engine then also reconciles them before it is ready).
"""

from __future__ import annotations

import compileall
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from datetime import datetime
from pathlib import Path

from _util import BOARD_V1, MODELS, REPO, Report, arg_parser, summary
from support.briefs import SHIM, Shim, copy_board
from support.daemon import INIT, INITIALIZED, short_tmpdir

QUERY = "login redirect loop after deploy"
FLOORS = {
    "python -c pass": "pass",
    "import mcp.types": "import mcp.types",
    "import mcp.server.lowlevel": "import mcp.server.lowlevel",
    "import lancedb": "import lancedb",
}
#: Daemon log events timed from the shim's spawn, in the order they happen.
EVENTS = ("starting", "listening", "engine_ready", "model_ready")


def daemons_of(home: Path) -> list[int]:
    """Pids of the ``memoryd serve`` processes whose environment has ``MEMORYD_HOME=home``."""
    marker = f"MEMORYD_HOME={home}\0".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                cmd = Path("/proc", entry, "cmdline").read_bytes()
                if b"serve" in cmd and marker in Path("/proc", entry, "environ").read_bytes():
                    pids.append(int(entry))
    return pids


def stop_daemons(home: Path, timeout: float = 10.0) -> None:
    """SIGTERM every daemon of ``home``, SIGKILL what is left after ``timeout`` s."""
    pids = daemons_of(home)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if Path(f"/proc/{p}").exists() and not _zombie(p)]
        time.sleep(0.05)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _zombie(pid: int) -> bool:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    return True


def log_events(log: Path, since: float) -> dict[str, float]:
    """The first time (ms after the wall-clock ``since``) each of :data:`EVENTS` appears in a JSON log."""
    out: dict[str, float] = {}
    for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
        with contextlib.suppress(ValueError, KeyError, TypeError):
            entry = json.loads(line)
            name = entry["event"]
            if name in EVENTS and name not in out:
                at = datetime.fromisoformat(entry["timestamp"].replace("Z", "+00:00")).timestamp()
                out[name] = (at - since) * 1000
    return out


def wait_for_event(log: Path, event: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and f'"event": "{event}"' in log.read_text(errors="replace"):
            return
        time.sleep(0.05)
    raise RuntimeError(f"no {event} in the daemon log within {timeout} s:\n{log.read_text()[-3000:]}")


def cold_start(env: dict[str, str], briefs: bool) -> dict:
    """One cold start in a fresh home; returns the figures (ms from the shim's spawn) and the search mode."""
    root = short_tmpdir()
    home = root / "home"
    run_env = {**env, "MEMORYD_HOME": str(home)}
    if briefs:
        copy_board(BOARD_V1, home / "data" / "board")
    log = home / "state" / "memoryd-spawned.log"
    try:
        since = time.time()
        t0 = time.perf_counter()
        shim = Shim(root / "s.sock", run_env, start=True, pump=False)
        try:
            shim.send(INIT)
            answer = shim.recv(timeout=60)
            t_init = (time.perf_counter() - t0) * 1000
            if "result" not in answer:
                raise RuntimeError(f"initialize failed: {str(answer)[:300]}")
            shim.send(INITIALIZED)
            listed = shim.request("tools/list", timeout=60)
            t_list = (time.perf_counter() - t0) * 1000
            if not listed.get("result", {}).get("tools"):
                raise RuntimeError(f"tools/list failed: {str(listed)[:300]}")
            found = shim.request(
                "tools/call", {"name": "search_briefs", "arguments": {"query": QUERY}}, timeout=60
            )
            t_search = (time.perf_counter() - t0) * 1000
            result = found.get("result") or {}
            if result.get("isError") or "structuredContent" not in result:
                raise RuntimeError(f"search_briefs failed: {str(found)[:500]}")
            content = result["structuredContent"]
            wait_for_event(log, "model_ready", 120)
        finally:
            shim.close()
        events = log_events(log, since)
        return {
            "initialize": t_init,
            "tools/list": t_list,
            "search": t_search,
            "mode": content.get("mode"),
            "shown": content.get("shown"),
            "mode_note": content.get("mode_note"),
            "waited": next((b["text"] for b in result["content"][1:] if "waited" in b["text"]), None),
            **events,
        }
    except Exception:
        if log.exists():
            print(log.read_text()[-3000:], file=sys.stderr)
        raise
    finally:
        stop_daemons(home)
        shutil.rmtree(root, ignore_errors=True)


def stdlib_bytecode(prefix: Path) -> None:
    """Compile the standard library into the ``PYTHONPYCACHEPREFIX`` tree ``prefix``: a fresh install of
    memoryd lacks its own and its dependencies' bytecode, never the Python installation's."""
    skip = re.compile(r"[/\\](test|tests|idlelib|tkinter|turtledemo|lib2to3|ensurepip|site-packages)[/\\]")
    before = sys.pycache_prefix
    sys.pycache_prefix = str(prefix)
    try:
        compileall.compile_dir(sysconfig.get_paths()["stdlib"], quiet=2, rx=skip)
    finally:
        sys.pycache_prefix = before


def floor_ms(python: str, code: str, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([python, "-c", code], check=True, env=env)
    return (time.perf_counter() - t0) * 1000


#: How the installed interpreter finds bytecode: as ``make setup`` leaves it (compiled), or as a fresh
#: install that never compiled it (``uv sync`` without ``--compile-bytecode``): every module of the SDK,
#: LanceDB and memoryd is compiled from source at the first start (a fresh ``PYTHONPYCACHEPREFIX``).
INSTALLS = ("bytecode", "no bytecode")
LABELS = {
    "starting": "daemon log 'starting' (interpreter, command line, settings)",
    "listening": "daemon log 'listening' (socket served)",
    "initialize": "initialize answered",
    "tools/list": "tools/list answered",
    "search": "first search_briefs answered",
    "engine_ready": "daemon log 'engine_ready' (index open, board reconciled)",
    "model_ready": "daemon log 'model_ready' (hybrid search)",
}
FLOOR_OF = "import mcp.server.lowlevel"  # what the answers to initialize and tools/list are read against


def main() -> int:
    parser = arg_parser(__doc__)
    parser.add_argument("--runs", type=int, default=10, help="cold starts to time, for each install")
    parser.add_argument("--briefs", action="store_true", help="start on a copy of board-v1, not an empty one")
    parser.add_argument("--bytecode-only", action="store_true", help="skip the install without bytecode")
    args = parser.parse_args()
    runs = min(args.runs, 4) if args.quick else args.runs
    installs = INSTALLS[:1] if args.bytecode_only else INSTALLS
    # An installed package has its bytecode; PYTHONDONTWRITEBYTECODE would otherwise recompile every run.
    for folder in ("daemon", "shim"):
        compileall.compile_dir(REPO / folder, quiet=1)
    keep = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "PYTHONPATH", "LANG", "LC_ALL")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(MEMORYD_MODELS=str(MODELS), MEMORYD_LOG_LEVEL="info", LANCEDB_LOG="error")
    report = Report("coldstart", "A new user's first agent: spawn with no daemon running")
    figures: dict[str, dict[str, list[float]]] = {install: {} for install in installs}
    floors: dict[str, list[float]] = {name: [] for name in FLOORS}
    modes, notes = set(), set()
    python = str(Path(SHIM).with_name("python"))
    stdlib_only = Path(tempfile.mkdtemp(prefix="md-pyc-stdlib-"))
    if "no bytecode" in installs:
        stdlib_bytecode(stdlib_only)
    for _ in range(runs):  # interleaved, so the load moves the floors and the cold starts alike
        for name, code in FLOORS.items():
            floors[name].append(floor_ms(python, code, env))
        for install in installs:
            with tempfile.TemporaryDirectory(prefix="md-pyc-") as pyc:
                shutil.copytree(stdlib_only, pyc, dirs_exist_ok=True)
                one = cold_start({**env, "PYTHONPYCACHEPREFIX": pyc} if install != "bytecode" else env,
                                 args.briefs)  # fmt: skip
            for key in LABELS:
                if key in one:
                    figures[install].setdefault(key, []).append(one[key])
            modes.add(f"{one['mode']} ({one['shown']} shown)")
            waited = re.sub(r"\d+\.\d+", "N", one.get("waited") or "")  # one note for every run
            notes.update(n for n in (one.get("mode_note"), waited) if n)
    shutil.rmtree(stdlib_only, ignore_errors=True)
    f = {name: summary(values) for name, values in floors.items()}
    report.raw.update(floors=f, runs=runs)
    for name in FLOORS:
        report.row(f"floor: python -c {FLOORS[name]!r}: p50", f[name]["p50"], "ms")
    board = "board-v1 copy" if args.briefs else "empty board"
    for install in installs:
        s = {key: summary(values) for key, values in figures[install].items()}
        report.raw[install] = s
        for key in LABELS:
            for q in ("p50", "p95") if key in s else ():
                read_against = key in ("initialize", "tools/list")
                report.row(f"spawn -> {LABELS[key]}, {board}, {install}: {q}", s[key][q], "ms",
                           baseline=f[FLOOR_OF][q] if read_against else None,
                           baseline_label=FLOOR_OF if read_against else "")  # fmt: skip
    report.note(f"first search modes: {', '.join(sorted(modes))}")
    for note in sorted(notes):
        report.note(f"the first search said: {note}")
    report.finish(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
