"""The daemon's control line: ``memoryd status`` and ``memoryd forget --now`` ask a running daemon over its
socket (standard library only, so the CLI answers without importing the MCP SDK). Which first lines are
control requests is decided by the listener (:func:`memoryd.serve.listener.first_line_op`): a shim's
hello never enters this module.

Wire (contract §4 terms; the connection carries exactly one exchange, then the daemon closes it)::

    client -> {"memoryd":"status","v":1}
    daemon -> {"memoryd":"status","v":1,"status":{...}}

    client -> {"memoryd":"forget","v":1}
    daemon -> {"memoryd":"forget","v":1,"forget":{...}}   or   {"memoryd":"error","message":"..."}

``forget`` makes the daemon's one index writer re-read the whole board (so every
deletion on disk is applied), rewrite the live rows and drop every old LanceDB version, and answers once
that is done: :func:`forget_now` describes the answer. Only a peer with the daemon's uid gets this far
(:mod:`memoryd.serve.listener`).

``status`` is :meth:`memoryd.serve.daemon.Daemon.full_status`: ``running``, ``pid``, ``version``, ``started_at``
(ISO-8601 UTC), ``uptime_s``, ``sessions`` (MCP sessions connected now), ``socket`` (``path``, ``exists``,
``mode`` like ``"0600"``, ``owner_uid``, ``owner``), ``board``, ``index``, ``tool_groups``,
``tool_timeout_ms``, ``engine_state``, and ``engine`` (the engine slot's ``state``/``since_s``/``error``
merged with ``engine.status()`` once it is ready).
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memoryd_shim import rendezvous

#: How long a forget request waits for an engine that is still loading its index.
FORGET_ENGINE_WAIT_S = 60.0
#: Client side: re-reading the board and rewriting the index take seconds on a large board.
FORGET_TIMEOUT_S = 300.0


class Unanswered(ValueError):
    """The daemon took the request and closed (or reset) the connection without answering: it was stopping
    or died under the request, which it may or may not have carried out."""


def _answer_line(op: str, payload: dict[str, Any]) -> bytes:
    answer = {"memoryd": op, "v": rendezvous.WIRE_VERSION, op: payload}
    return (json.dumps(answer, ensure_ascii=False, default=str) + "\n").encode()


def _ask(
    socket_path: str | os.PathLike[str] | Path,
    op: str,
    timeout: float,
    fields: dict[str, Any] | None = None,
    limit: int = 1 << 20,
) -> dict[str, Any] | None:
    """One exchange of the control line: send the ``op`` request (with ``fields``), return the answer's
    ``op`` object (a line of at most ``limit`` bytes), or ``None`` when nothing answers on ``socket_path``.

    Raises ``ValueError`` with the daemon's message when it answers with an error line, or with what it got
    when the answer is not an ``op`` line (another program, a daemon speaking another wire version), and
    :class:`Unanswered` (a ``ValueError``) when it closes or resets the connection without answering (a
    daemon stopping under the request).
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        try:
            sock.connect(os.fsencode(socket_path))
        except OSError:
            return None
        request = {"memoryd": op, "v": rendezvous.WIRE_VERSION, **(fields or {})}
        sock.sendall((json.dumps(request, ensure_ascii=False) + "\n").encode())
        with sock.makefile("rb") as reader:
            line = reader.readline(limit)
    except TimeoutError as exc:
        raise ValueError(f"the daemon on {socket_path} did not answer the {op} request: {exc}") from exc
    except ConnectionError as exc:  # reset: a daemon that closed its listener with the request queued
        raise Unanswered(f"the daemon on {socket_path} did not answer the {op} request: {exc}") from exc
    finally:
        sock.close()
    if not line:  # connected, then closed unanswered: a daemon stopping (or dying) under the request
        filed = (
            " (`memoryd tasks` shows whether the brief was filed before it stopped)"
            if op == "capture"
            else ""
        )
        raise Unanswered(
            f"the daemon on {socket_path} closed the connection without answering the {op} request (it was "
            f"stopping?); run the command again once `memoryd status` answers{filed}"
        )
    try:
        answer = json.loads(line)
    except ValueError:
        answer = None
    if isinstance(answer, dict) and answer.get("memoryd") == "error":
        raise ValueError(str(answer.get("message", f"the daemon refused the {op} request")))
    if not isinstance(answer, dict) or answer.get("memoryd") != op or not isinstance(answer.get(op), dict):
        raise ValueError(f"unexpected answer from {socket_path}: {line[:200]!r}")
    return answer[op]


# --- status ------------------------------------------------------------------------------------------


def status_line(status: dict[str, Any]) -> bytes:
    """The daemon's one-line answer."""
    return _answer_line("status", status)


def ask_status(socket_path: str | os.PathLike[str] | Path, timeout: float = 3.0) -> dict[str, Any] | None:
    """The running daemon's status, or ``None`` when nothing answers on ``socket_path`` (not running).

    Raises ``ValueError`` when something answers but not with a status line (another program, or a
    daemon speaking another wire version).
    """
    return _ask(socket_path, "status", timeout)


@dataclass(frozen=True)
class DaemonAnswer:
    """What answers on the socket a command talks to: the daemon's ``status``; else ``error`` says why what
    answers is not a memoryd daemon speaking this wire version; both ``None``: nothing answers (not running)."""

    socket: Path
    status: dict[str, Any] | None = None
    error: str | None = None


def daemon_status(socket: str | None = None, timeout: float = 3.0) -> DaemonAnswer:
    """Ask the daemon on the socket a command talks to (``socket``, else this environment's: ``MEMORYD_SOCKET``
    or the state folder's) for its status; what answers there, never an exception, is in the answer."""
    from memoryd.paths import resolve

    path = resolve(socket=socket).socket
    try:
        return DaemonAnswer(path, ask_status(path, timeout))
    except ValueError as exc:
        return DaemonAnswer(path, error=str(exc))


def served_board(timeout: float = 0.3) -> Path:
    """The board the running daemon serves (asked over this install's socket), else the configured one: a
    command that edits board files edits the daemon's. A board named by ``MEMORYD_BOARD``/``MEMORYD_INDEX``
    is the one edited, whichever board the daemon serves."""
    from memoryd.paths import board_named, resolve

    locations = resolve()
    if board_named():
        return locations.board
    try:
        status = ask_status(locations.socket, timeout=timeout)
    except (OSError, ValueError):
        status = None
    if status and isinstance(status.get("board"), str) and status["board"]:
        return Path(status["board"])
    return locations.board


def already_running_advice(
    socket_path: str | os.PathLike[str] | Path, http_port: int = 0, command: str = "memoryd"
) -> str:
    """What a person who ran ``memoryd serve`` (``--http`` when ``http_port``) can do about the daemon that
    already answers on ``socket_path``, spelled with ``command``; ``""`` when none answers (it is starting
    or stopping). A daemon of the service is the service's to stop (``memoryd stop`` refuses it)."""
    try:
        status = ask_status(socket_path)
    except ValueError:
        return ""
    if not status:
        return ""
    pid, http = status.get("pid"), status.get("http")
    url = http.get("url") if isinstance(http, dict) else None
    served = f"it already serves HTTP at {url} (`{command} open` shows the page)"
    if status.get("activation"):
        if http_port and url is None:
            return (
                f"it is the {status['activation']} service: `{command} service install --http` turns HTTP on"
            )
        if http_port:
            return served
        return f"it is the {status['activation']} service (`{command} service stop` stops it)"
    if http_port and url is not None:
        return served
    again = f"{command} serve --http" if http_port else f"{command} serve"
    if http_port and http_port != 7077:  # memoryd.http.files.DEFAULT_PORT
        again += f" {http_port}"
    unserved = "it does not serve HTTP: " if http_port else ""
    return f"{unserved}stop it (pid {pid}) with `{command} stop`, then run `{again}`"


# --- forget ------------------------------------------------------------------------------------------


def forget_line(result: dict[str, Any]) -> bytes:
    """The daemon's one-line answer to a forget request that succeeded."""
    return _answer_line("forget", result)


def folder_bytes(path: str | os.PathLike[str]) -> int:
    """Total size in bytes of the regular files under ``path`` (symlinks not followed; 0 when absent)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue  # removed while walking (a cleanup running elsewhere)
            total += st.st_size
    return total


async def forget_now(engine: Any) -> dict[str, Any]:
    """Run forget on a ready :class:`memoryd.core.engine.Engine`, in its writer task; returns the report.

    ``{"board", "index", "reconciled": {"added","updated","deleted","unchanged"}, "records",
    "index_bytes_before", "index_bytes_after", "version", "seconds"}``. Raises what the writer raised
    (e.g. ``BoardUnreadable`` when the board root is missing: nothing is deleted then).
    """
    index = Path(engine.settings.locations.index)
    before = folder_bytes(index)
    started = time.monotonic()
    await engine.indexer.purge_now()
    report = engine.indexer.last_report
    return {
        "board": str(engine.board),
        "index": str(index),
        "reconciled": {
            "added": report.added,
            "updated": report.updated,
            "deleted": report.deleted,
            "unchanged": report.unchanged,
        },
        "records": engine.store.count(),
        "index_bytes_before": before,
        "index_bytes_after": folder_bytes(index),
        "version": engine.store.version(),
        "seconds": round(time.monotonic() - started, 3),
    }


async def forget_answer(engine_handle: Any, wait_s: float = FORGET_ENGINE_WAIT_S) -> bytes:
    """The line answering a forget request: run :func:`forget_now` on the engine of ``engine_handle``
    (:class:`memoryd.core.warmup.EngineHandle`, waiting up to ``wait_s`` while it loads), or an error line."""
    try:
        engine = await engine_handle.get(wait_s=wait_s)
        return forget_line(await forget_now(engine))
    except Exception as exc:  # the answer says why; the daemon keeps serving
        return rendezvous.error_line(f"forget failed: {exc}")


def ask_forget(
    socket_path: str | os.PathLike[str] | Path, timeout: float = FORGET_TIMEOUT_S
) -> dict[str, Any] | None:
    """Ask the running daemon to forget now; its report (:func:`forget_now`), or ``None`` when nothing
    answers on ``socket_path`` (not running).

    Raises ``ValueError`` with the daemon's message when it answers with an error (board unreadable,
    engine failed, a daemon too old to know the request), or with what it got when the answer is not a
    forget line.
    """
    return _ask(socket_path, "forget", timeout)


# --- capture ------------------------------------------------------------------------------------------

#: A capture request may carry a long prompt or answer; past this the line is refused (hooks cut before).
MAX_CAPTURE_BYTES = 1 << 20
#: How long a capture request waits for an engine that is still loading (the hook has long gone by
#: then; the request is still filed).
CAPTURE_ENGINE_WAIT_S = 120.0


async def capture_answer(engine_handle: Any, line: bytes, wait_s: float = CAPTURE_ENGINE_WAIT_S) -> bytes:
    """The line answering a capture request: ``{"memoryd":"capture","v":1,"capture":{...}}`` with
    :meth:`memoryd.core.capture.Capture.handle`'s answer, or an error line saying why."""
    if len(line) > MAX_CAPTURE_BYTES:
        return rendezvous.error_line(f"capture request longer than {MAX_CAPTURE_BYTES} bytes")
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: nested too deep to parse
        return rendezvous.error_line("capture request is not JSON")
    if not isinstance(msg, dict) or msg.get("v") != rendezvous.WIRE_VERSION:
        return rendezvous.error_line(f"capture request must be a wire v{rendezvous.WIRE_VERSION} object")
    # a person's `memoryd brief` reads the answer; a hook's goes to the log
    request = msg.get("request")
    typed = isinstance(request, dict) and request.get("event") == "brief"
    refused = (
        ("brief not filed", "filing the brief failed") if typed else ("capture refused", "capture failed")
    )
    try:
        engine = await engine_handle.get(wait_s=wait_s)
        return _answer_line("capture", await engine.capture.handle(request))
    except ValueError as exc:
        _warn("capture_refused", request, str(exc))
        return rendezvous.error_line(f"{refused[0]}: {exc}")
    except Exception as exc:  # the answer says why; the daemon keeps serving
        _warn("capture_failed", request, f"{type(exc).__name__}: {exc}")
        return rendezvous.error_line(f"{refused[1]}: {type(exc).__name__}: {exc}")


def _warn(event: str, request: Any, error: str) -> None:
    """Log a capture the daemon did not file (a hook shows the agent nothing: the log is where it shows)."""
    from memoryd.logs import get_logger  # the daemon's logger; this module stays importable without it

    req = request if isinstance(request, dict) else {}
    kind, agent = req.get("event"), req.get("agent")
    get_logger("memoryd.serve.control").warning(
        event,
        error=error[:300],
        capture_event=kind if isinstance(kind, str) else None,
        agent=agent if isinstance(agent, str) else None,
    )


def ask_capture(
    socket_path: str | os.PathLike[str] | Path, request: dict[str, Any], timeout: float = 30.0
) -> dict[str, Any] | None:
    """Send one capture request (``memoryd brief``); the answer, or ``None`` when no daemon answers.

    Raises ``ValueError`` with the daemon's message when it refuses the request.
    """
    return _ask(socket_path, "capture", timeout, {"request": request}, limit=1 << 24)
