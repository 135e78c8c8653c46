"""``memoryd service install | uninstall | start | stop | restart | status | logs``.

Every command prints what it did (files written or removed, each ``launchctl``/``systemctl`` command
run as ``$ ...``). Exit codes: 0 done; 1 failed (the message says what to run); ``status`` returns
``memoryd status``'s code (0 up, 3 not running). After upgrading memoryd, ``memoryd service restart``
makes the running daemon the new version (agents' shims reconnect on their own).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from memoryd.cli.options import command
from memoryd.cli.service.common import Actions, ServiceError
from memoryd.settings import port_arg

FOLLOW_POLL_S = 0.5


def register(sub) -> None:
    """Add ``memoryd service ...`` to the ``memoryd`` sub-parsers ``sub``."""
    p = command(
        sub,
        "service",
        main,
        help="run memoryd as a background service (launchd on macOS, systemd --user on Linux)",
        description="Install and control memoryd as a LaunchAgent (macOS) or a systemd user service (Linux). "
        "After an upgrade, run `memoryd service restart`.",
    )
    actions = p.add_subparsers(dest="service_command", required=True)
    install = actions.add_parser("install", help="write, validate and load the plist/units (idempotent)")
    install.add_argument(
        "--print", action="store_true", dest="print_only", help="print the definitions; change nothing"
    )
    install.add_argument(
        "--http",
        nargs="?",
        type=port_arg,
        const=7077,
        metavar="PORT",
        help="the service also serves MCP over HTTP and the page on 127.0.0.1 (default port 7077; 0: off; "
        "without this flag, MEMORYD_HTTP_PORT at install time decides)",
    )
    actions.add_parser("uninstall", help="stop the service and remove what install wrote")
    actions.add_parser("start", help="start the installed service")
    actions.add_parser("stop", help="stop the service (it comes back at the next login)")
    actions.add_parser("restart", help="restart the daemon (do this after upgrading memoryd)")
    status = actions.add_parser("status", help="the service manager's view plus `memoryd status`")
    status.add_argument("--json", action="store_true")
    logs = actions.add_parser("logs", help="print the end of the daemon's log")
    logs.add_argument("-n", "--lines", type=int, default=50, help="lines to print (default 50)")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing new lines (Ctrl-C stops)")
    logs.add_argument(
        "--stderr", action="store_true", help="the service manager's stderr file (crashes) instead"
    )


def main(args) -> int:
    from memoryd.cli.service.manager import get_manager

    try:
        if args.service_command == "status":
            return _status(args.json)
        if args.service_command == "logs" and not args.stderr:
            return _logs(args.lines, args.follow)  # the daemon's log, whoever started it: no manager needed
        mgr = get_manager(actions=Actions(), http_port=getattr(args, "http", None))
        if args.service_command == "logs":
            return _logs(args.lines, args.follow, _stderr_path(mgr))
        if args.service_command == "install" and args.print_only:
            for path, text in mgr.rendered().items():
                print(f"# {path}\n{text}")
            return 0
        getattr(mgr, args.service_command)()
        if args.service_command == "install":
            print(f"installed: logs go to {mgr.ctx.log_file}; {mgr.crash_log_hint()}")
        elif args.service_command == "uninstall":
            locs = mgr.ctx.locations
            print(f"kept the board ({locs.board}), the index ({locs.index}) and the logs ({locs.logs})")
        return 0
    except ServiceError as exc:
        print(f"memoryd service {args.service_command}: {exc}", file=sys.stderr)
        return exc.exit_code


def _status(as_json: bool) -> int:
    from memoryd.cli import status
    from memoryd.cli.service.manager import service_state

    state = service_state()
    if as_json:
        from memoryd.serve.control import daemon_status

        answer = daemon_status()
        daemon = (
            status.summarize(answer.status)
            if answer.status
            else {"running": False, "socket": {"path": str(answer.socket)}}
        )
        if answer.error:
            daemon["error"] = answer.error
        print(json.dumps({"service": state, "daemon": daemon}, ensure_ascii=False))
        return status.EXIT_UP if answer.status else status.EXIT_NOT_RUNNING
    manager = state["manager"] or "no service manager"
    print(f"service   {manager}: {state['detail']}")
    if state["fix"]:
        print(f"  fix     {state['fix']}")
    return status.main()


def _stderr_path(mgr) -> Path:
    if mgr.name == "systemd":
        from memoryd.cli.service.systemd import SERVICE

        raise ServiceError(
            f"systemd keeps the daemon's stderr in the journal: journalctl --user -u {SERVICE}"
        )
    return mgr.ctx.stderr_file


def _daemon_log() -> tuple[Path | None, str | None]:
    """The log of the daemon this install talks to, and a line saying whose it is when that is not the
    service's own log; ``(None, why)`` when there is no file to show.

    A running daemon says where it writes (its status' ``log_file``, else ``stderr_file``: the file a shim
    that started it appends its stderr to); with none running, the service's log, else the one a shim's
    daemon last wrote."""
    from memoryd.paths import resolve
    from memoryd.serve.control import daemon_status
    from memoryd_shim.rendezvous import spawn_log_path_str

    service_log, spawn_log = resolve().log_file, Path(spawn_log_path_str())
    running = daemon_status().status
    if running and "stderr_file" in running:  # a daemon too old to say falls through to the files
        pid = running.get("pid")
        if running.get("log_file"):
            return Path(running["log_file"]), None
        if running.get("stderr_file"):
            path = Path(running["stderr_file"])
            whose = "an agent's shim" if path == spawn_log else "hand"
            return (
                path,
                f"the daemon running (pid {pid}) was started by {whose}, not as a service; its log is {path}",
            )
        from memoryd.cli.service.manager import manager_here

        service = "run it as a service (`memoryd service install`), or " if manager_here() else ""
        return None, (
            f"the daemon running (pid {pid}) was started by hand, not as a service: it writes its log to the "
            f"terminal it runs in. For a log file, stop it (`memoryd stop`) and {service}let an agent's shim "
            f"start it (its log is then {spawn_log})"
        )
    if service_log.exists():
        return service_log, None
    if spawn_log.exists():
        return (
            spawn_log,
            f"no daemon is running; this is the log of the last one an agent's shim started ({spawn_log})",
        )
    return None, (
        f"no log yet: a daemon run as a service writes {service_log}, one an agent's shim starts writes "
        f"{spawn_log}; `memoryd service status` shows whether one runs"
    )


def _tail(path: Path, lines: int) -> tuple[list[str], int]:
    """The last ``lines`` lines of ``path`` and the file size read up to."""
    with open(path, "rb") as handle:
        handle.seek(0, 2)
        size = handle.tell()
        block, data = 1 << 16, b""
        while size - len(data) > 0 and data.count(b"\n") <= lines:
            start = max(0, size - len(data) - block)
            handle.seek(start)
            data = handle.read(size - len(data) - start) + data
    text = data.decode("utf-8", errors="replace").splitlines()
    return text[-lines:] if lines > 0 else [], size


def _logs(lines: int, follow: bool, stderr_path: Path | None = None) -> int:
    """Print the last ``lines`` lines of the daemon's log (:func:`_daemon_log`), or of the service manager's
    stderr file ``stderr_path``; 1 when there is none (the message says where to look)."""
    if stderr_path is not None:
        path, note = stderr_path, None
        if not path.exists():
            note = f"no log at {path} yet (the service manager writes it when the service runs)"
            path = None
    else:
        path, note = _daemon_log()
    if path is not None and not path.exists():
        path, note = None, (f"{note}; that file is gone" if note else f"no log at {path}")
    if note:
        print(f"memoryd service logs: {note}", file=sys.stderr)
    if path is None:
        return 1
    shown, offset = _tail(path, max(0, lines))
    for line in shown:
        print(line)
    if not follow:
        return 0
    sys.stdout.flush()
    try:
        while True:
            time.sleep(FOLLOW_POLL_S)
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            if size < offset:
                offset = 0  # rotated: the new file starts from its beginning
            if size > offset:
                with open(path, "rb") as handle:
                    handle.seek(offset)
                    chunk = handle.read(size - offset)
                offset = size
                sys.stdout.write(chunk.decode("utf-8", errors="replace"))
                sys.stdout.flush()
    except KeyboardInterrupt:
        return 0
