"""``memoryd status [--json]``: ask the running daemon how it is, over its socket's control line.

Exit codes: 0 the daemon is up, 3 not running (nothing answers on the socket), 1 something answers that
is not a memoryd daemon speaking this wire version.

``--json`` prints one object (fields ``null`` while the engine is still loading)::

    {"running": true, "pid": 123, "version": "0.1.0", "started_at": "...Z", "uptime_s": 12.3,
     "board": "/...", "index": "/...", "records": 200, "briefs": 200, "tasks": 60, "memories": 40,
     "skipped_files": 0,
     "model": {"name": "multilingual-e5-small", "state": "ready", "detail": "..."}, "search_mode": "hybrid",
     "index_freshness": {"last_indexed_at": "...Z", "last_indexed_age_s": 3.2,
                         "last_optimize_at": "...Z", "last_optimize_age_s": 3.1},
     "watcher": "alive", "sessions": 2,
     "socket": {"path": "/...", "exists": true, "mode": "0600", "owner_uid": 501, "owner": "me"},
     "tool_groups": ["briefs"], "tool_timeout_ms": 15000,
     "engine": {"state": "ready", "since_s": 11.9},
     "wire": 1, "activation": "launchd", "log_file": "/.../memoryd.log", "stderr_file": null,
     "http": {"url": "http://127.0.0.1:7077", "mcp": "http://127.0.0.1:7077/mcp", "port": 7077, "sessions": 0},
     "installed": {"memoryd": "0.1.0", "memoryd_shim": "0.1.0", "wire": 1}, "restart_needed": false}

``version``/``wire`` are the running daemon's; ``installed`` is what this command (and the shim beside it)
would run now. They differ after an upgrade until the daemon restarts: ``restart_needed`` is then true
and the text output says to run ``memoryd service restart``. ``activation`` is the service manager that
passed the socket in (``null`` when the daemon bound it), ``log_file`` its rotating log (service only),
``stderr_file`` the file its stderr goes to (an agent's shim started it: ``<state>/memoryd-spawned.log``).
``http`` is where the daemon serves MCP over HTTP and the page (``null`` when it does not; the token is
never shown: ``memoryd open`` hands it to the browser, ``memoryd connect --http`` to the agents).

and, when not running, ``{"running": false, "socket": {"path": "/..."}}``.

Both shapes also carry ``"settings"``: what is wrong with this shell's ``MEMORYD_*`` variables
(:func:`memoryd.settings.check_env`), ``[{"variable", "state": "refused"|"clamped", "message"}]``, empty
when nothing is; the text output says it on a ``settings`` line. A refused value does not change the exit
code (the daemon that answers was started elsewhere), but a daemon started from this shell would not start.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import memoryd_shim
from memoryd import __version__
from memoryd.cli.options import command
from memoryd.serve.control import DaemonAnswer, daemon_status
from memoryd.wording import counted
from memoryd_shim import rendezvous

EXIT_UP = 0
EXIT_ERROR = 1
EXIT_NOT_RUNNING = 3


def _iso(epoch: float | None) -> str | None:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch)) if epoch else None


def _age(epoch: float | None, now: float) -> float | None:
    return round(max(0.0, now - epoch), 1) if epoch else None


def summarize(raw: dict[str, Any], now: float | None = None) -> dict[str, Any]:
    """The daemon's status answer (:mod:`memoryd.serve.control`) as the flat object ``--json`` prints."""
    now = time.time() if now is None else now
    engine = raw.get("engine") or {}
    indexed, optimized = engine.get("last_indexed_at"), engine.get("last_optimize_at")
    slot = {k: engine[k] for k in ("state", "since_s", "error", "status_error") if k in engine}
    return {
        "running": True,
        "pid": raw.get("pid"),
        "version": raw.get("version"),
        "started_at": raw.get("started_at"),
        "uptime_s": raw.get("uptime_s"),
        "board": raw.get("board"),
        "index": raw.get("index"),
        "records": engine.get("records"),
        "briefs": engine.get("briefs"),
        "tasks": engine.get("tasks"),
        "memories": engine.get("memories"),
        "skipped_files": engine.get("skipped_files"),
        "skipped": engine.get("skipped") or [],
        "model": engine.get("model"),
        "search_mode": engine.get("search_mode"),
        "index_freshness": {
            "last_indexed_at": _iso(indexed),
            "last_indexed_age_s": _age(indexed, now),
            "last_optimize_at": _iso(optimized),
            "last_optimize_age_s": _age(optimized, now),
        },
        "watcher": engine.get("watcher"),
        "sessions": raw.get("sessions"),
        "socket": raw.get("socket"),
        "tool_groups": raw.get("tool_groups"),
        "tool_timeout_ms": raw.get("tool_timeout_ms"),
        "engine": slot or {"state": raw.get("engine_state")},
        "wire": raw.get("wire"),
        "activation": raw.get("activation"),
        "log_file": raw.get("log_file"),
        "stderr_file": raw.get("stderr_file"),
        "http": _http(raw.get("http")),
        "installed": installed(),
        "restart_needed": raw.get("version") != __version__
        or raw.get("wire", rendezvous.WIRE_VERSION) != rendezvous.WIRE_VERSION,
    }


def _memories(n: Any) -> str:
    """``", 2 memories"`` for the board line; nothing from a daemon too old to count them."""
    return f", {counted(n, 'memory')}" if isinstance(n, int) else ""


def _http(raw: Any) -> dict[str, Any] | None:
    """The daemon's HTTP block, ``{"url", "mcp", "port", "sessions"}`` (never the token), or ``None``."""
    if not isinstance(raw, dict) or not raw.get("url"):
        return None
    url = str(raw["url"]).rstrip("/")
    return {"url": url, "mcp": f"{url}/mcp", "port": raw.get("port"), "sessions": raw.get("sessions")}


def installed() -> dict[str, Any]:
    """The versions installed beside this command: ``{"memoryd", "memoryd_shim", "wire"}``."""
    return {"memoryd": __version__, "memoryd_shim": memoryd_shim.__version__, "wire": rendezvous.WIRE_VERSION}


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes:02d} min"
    return f"{hours // 24} days {hours % 24} h"


def _ago(seconds: float | None) -> str:
    return "never" if seconds is None else f"{_duration(seconds)} ago"


def render(s: dict[str, Any]) -> str:
    """Readable lines for a person at a terminal."""
    engine = s["engine"]
    lines = [
        f"memoryd {s['version']} is running (pid {s['pid']}, up {_duration(s['uptime_s'])}, "
        f"since {s['started_at']})"
    ]
    if engine.get("state") != "ready":
        state = engine.get("state", "unknown")
        detail = f": {engine['error']}" if engine.get("error") else ""
        lines.append(f"  engine    {state} for {_duration(engine.get('since_s'))}{detail}")
        lines.append(f"  board     {s['board']}")
        lines.append(f"  index     {s['index']}")
    else:
        skipped = f", {counted(s['skipped_files'], 'file')} skipped:" if s["skipped_files"] else ""
        fresh = s["index_freshness"]
        model = s["model"] or {}
        mode = "hybrid search" if s["search_mode"] == "hybrid" else "keyword-only search"
        detail = f" ({model['detail']})" if model.get("detail") else ""
        lines += [
            f"  board     {s['board']}: {counted(s['tasks'], 'task')}, {counted(s['briefs'], 'brief')}"
            f"{_memories(s['memories'])}{skipped}",
            *_skipped_lines(s),
            f"  index     {s['index']}: {counted(s['records'], 'record')}; last write "
            f"{_ago(fresh['last_indexed_age_s'])}, last compaction {_ago(fresh['last_optimize_age_s'])}",
            f"  model     {model.get('name')}: {model.get('state')}{detail}, {mode}",
            f"  watcher   {s['watcher']}",
        ]
    mine = s["installed"]
    wire = f"wire v{s['wire']}" if s.get("wire") is not None else "wire version unknown"
    lines.append(
        f"  versions  daemon memoryd {s['version']} ({wire}); installed memoryd {mine['memoryd']}, "
        f"memoryd-shim {mine['memoryd_shim']} (wire v{mine['wire']})"
    )
    if s["restart_needed"]:
        lines.append(
            "            the running daemon is not the installed version: run `memoryd service restart`"
        )
    if s.get("activation") or s.get("log_file"):
        via = f"socket from {s['activation']}" if s.get("activation") else "own socket"
        lines.append(f"  service   {via}; log {s.get('log_file') or 'stderr'}")
    elif s.get("stderr_file"):
        lines.append(f"  log       {s['stderr_file']} (not run as a service)")
    sock = s["socket"] or {}
    lines += [
        f"  sessions  {s['sessions']} connected",
        f"  socket    {sock.get('path')} (mode {sock.get('mode')}, owner {sock.get('owner')})",
        f"  tools     {', '.join(s['tool_groups'] or [])}; {s['tool_timeout_ms']} ms per call",
    ]
    http = s.get("http")
    if http:
        lines.append(
            f"  http      {http['url']} (MCP at {http['mcp']}, {http['sessions']} sessions); "
            "`memoryd open` shows the page"
        )
    else:
        lines.append("  http      off (`memoryd open` says how to turn it on)")
    return "\n".join(lines)


def _skipped_lines(s: dict[str, Any]) -> list[str]:
    """The board files the daemon does not load, as many as its status names, each with its reason."""
    shown = s.get("skipped") or []
    lines = [f"            {k['path']}: {k['reason']}" for k in shown]
    more = (s.get("skipped_files") or 0) - len(shown)
    if more > 0:
        lines.append(f"            and {more} more (the daemon's log names each)")
    return lines


def settings_lines(problems: list[dict[str, str]]) -> list[str]:
    """The text lines for :func:`memoryd.settings.check_env`'s findings."""
    lines = []
    for p in problems:
        then = (
            "; a daemon started from this shell exits at once (unset it or fix it)"
            if p["state"] == "refused"
            else ""
        )
        lines.append(f"  settings  {p['message']}{then}")
    return lines


def register(sub) -> None:
    """Add the ``status`` sub-command to the ``argparse`` sub-parsers ``sub``."""
    st = command(sub, "status", cmd_status, help="ask the running daemon; exit 0 when up, 3 when not running")
    st.add_argument("--socket")
    st.add_argument("--json", action="store_true")


def cmd_status(args) -> int:
    return main(socket=args.socket, as_json=args.json)


def ask_daemon(command: str, socket: str | None) -> DaemonAnswer | None:
    """What answers on the socket ``memoryd <command>`` talks to (``socket``, else this environment's); None
    once it has said on stderr why what answers is not a memoryd daemon (the command then exits 1)."""
    answer = daemon_status(socket)
    if answer.error is not None:
        print(f"memoryd {command}: {answer.error}", file=sys.stderr)
        return None
    return answer


def main(socket: str | None = None, as_json: bool = False) -> int:
    """Print the running daemon's status; returns the exit code (0 up, 3 not running, 1 not memoryd)."""
    from memoryd.settings import check_env

    problems = [{"variable": v, "state": st, "message": m} for v, st, m in check_env()]
    answer = ask_daemon("status", socket)
    if answer is None:
        return EXIT_ERROR
    path, raw = answer.socket, answer.status
    if raw is None:
        if as_json:
            print(json.dumps({"running": False, "socket": {"path": str(path)}, "settings": problems}))
        else:
            print(
                "\n".join(
                    [
                        f"memoryd is not running (nothing answers on {path}).",
                        *settings_lines(problems),
                        "Start it with `memoryd serve` (or `make run`); an agent's memoryd-shim also starts it.",
                    ]
                )
            )
        return EXIT_NOT_RUNNING
    summary = summarize(raw)
    summary["settings"] = problems
    print(
        json.dumps(summary, ensure_ascii=False)
        if as_json
        else "\n".join([render(summary), *settings_lines(problems)])
    )
    return EXIT_UP
