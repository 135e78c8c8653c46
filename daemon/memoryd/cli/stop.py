"""``memoryd stop [--socket PATH] [--timeout S]``: stop the daemon that answers on the socket, cleanly.

The daemon is found by asking its status over the socket (:func:`memoryd.cli.status.ask_daemon`), which
names its pid. A daemon run by the service manager is left alone: launchd's ``KeepAlive`` or systemd's
socket unit would start it again, so the message says to run ``memoryd service stop``. Any other daemon (one
an agent's shim started, ``memoryd serve`` in another terminal) gets SIGTERM, only when its process belongs
to this user, and the command waits for it to exit: the daemon removes its socket, finishes its index
writes and releases its locks within a few seconds.

When agents were connected, the message says their shims start it again within a second, and how to
stop it for good.

Exit codes: 0 stopped, or none was running (the message says which); 1 not stopped (run by the service, the
process is another user's, it did not exit within ``--timeout``, or what answers is not a memoryd daemon).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

from memoryd.board.atomic import pid_alive
from memoryd.cli.options import SERVED_SOCKET_HELP, command, locations
from memoryd.wording import counted

EXIT_STOPPED = 0
EXIT_NOT_STOPPED = 1
#: Longer than the daemon's own shutdown budget and its watchdog (about 5 s), so a daemon that stops at all
#: has stopped by then.
DEFAULT_WAIT_S = 10.0
_POLL_S = 0.05


def register(sub) -> None:
    """Add the ``stop`` sub-command to the ``argparse`` sub-parsers ``sub``."""
    p = command(
        sub,
        "stop",
        cmd_stop,
        help="stop the running daemon (one a shim or `memoryd serve` started; the service: `memoryd service stop`)",
    )
    locations(p, socket=SERVED_SOCKET_HELP)
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_WAIT_S,
        metavar="SECONDS",
        help=f"how long to wait for it to exit (default {DEFAULT_WAIT_S:g})",
    )


def cmd_stop(args) -> int:
    return main(socket=args.socket, wait_s=args.timeout)


def process_uid(pid: int) -> int | None:
    """The real uid owning process ``pid``, or ``None`` when it cannot be told (gone, or no way to ask)."""
    try:
        return os.stat(f"/proc/{pid}").st_uid  # Linux
    except FileNotFoundError:
        if os.path.isdir("/proc/self"):
            return None  # /proc exists, the process does not
    except OSError:
        return None
    try:  # macOS: no /proc
        done = subprocess.run(
            ["ps", "-o", "uid=", "-p", str(pid)], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = done.stdout.strip()
    return int(text) if done.returncode == 0 and text.isdigit() else None


def _is_zombie(pid: int) -> bool:
    """Whether ``pid`` has exited and only waits for its parent to collect its status."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        pass
    try:
        done = subprocess.run(
            ["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.stdout.strip().startswith("Z")


def alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie has exited: its files and locks are closed)."""
    return pid_alive(pid) and not _is_zombie(pid)


def terminate(pid: int, wait_s: float) -> bool:
    """Send SIGTERM to ``pid`` and wait up to ``wait_s`` seconds for it to exit; ``True`` once it has
    (or was already gone). Raises ``PermissionError`` when the process is not ours to signal."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + max(0.0, wait_s)
    while alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_S)
    return True


def service_owner(status: dict[str, Any]) -> str | None:
    """``"launchd"``/``"systemd"`` when the service manager runs the daemon of ``status``, else ``None``:
    the manager passed its socket in (``activation``), or the manager's own view names the same pid."""
    if status.get("activation"):
        return str(status["activation"])
    from memoryd.cli.service.common import ServiceError
    from memoryd.cli.service.manager import choose, get_manager

    try:
        name = choose()
        if name is None:
            return None
        state = get_manager(name).state()
    except (ServiceError, OSError):
        return None
    return name if state.running and state.pid == status.get("pid") else None


def main(socket: str | None = None, wait_s: float = DEFAULT_WAIT_S) -> int:
    """Stop the daemon on ``socket`` (default: this environment's); returns the exit code (module docstring)."""
    from memoryd.cli.status import ask_daemon
    from memoryd.paths import memoryd_command

    me = memoryd_command()
    answer = ask_daemon("stop", socket)
    if answer is None:
        return EXIT_NOT_STOPPED
    path, status = answer.socket, answer.status
    if status is None:
        print(f"memoryd is not running (nothing answers on {path}); nothing to stop.")
        return EXIT_STOPPED
    pid = status.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
        print(f"memoryd stop: the daemon on {path} did not say its pid ({pid!r})", file=sys.stderr)
        return EXIT_NOT_STOPPED
    owner = service_owner(status)
    if owner is not None:
        print(
            f"memoryd stop: memoryd (pid {pid}) runs as the {owner} service, which would start it again; "
            f"stop it with `{me} service stop` (it comes back at the next login; `{me} service uninstall` "
            "removes the service).",
            file=sys.stderr,
        )
        return EXIT_NOT_STOPPED
    uid = process_uid(pid)
    if uid != os.getuid():
        whose = "cannot tell who owns it" if uid is None else f"it belongs to uid {uid}, not you"
        print(f"memoryd stop: not stopping pid {pid}: {whose}", file=sys.stderr)
        return EXIT_NOT_STOPPED
    try:
        stopped = terminate(pid, wait_s)
    except PermissionError:
        print(f"memoryd stop: not allowed to signal pid {pid}", file=sys.stderr)
        return EXIT_NOT_STOPPED
    if not stopped:
        print(
            f"memoryd stop: sent SIGTERM to pid {pid}, but it is still running after {wait_s:g} s; "
            f"it may be finishing an index write: run `{me} stop` again in a moment (`{me} status` shows "
            "whether it still runs).",
            file=sys.stderr,
        )
        return EXIT_NOT_STOPPED
    print(f"stopped memoryd (pid {pid}, socket {path}).")
    connected = _sessions(status)
    if connected:
        from memoryd.cli.service.manager import manager_here

        service = (
            f" (`{me} service stop` or `uninstall` when the service is installed)" if manager_here() else ""
        )
        print(
            f"{counted(connected, 'agent session')} "
            + ("was connected: its shim starts" if connected == 1 else "were connected: their shims start")
            + f" memoryd again within a second; to stop it for good, close those agents or run `{me} "
            f"disconnect`{service}."
        )
    return EXIT_STOPPED


def _sessions(status: dict[str, Any]) -> int:
    """The MCP sessions connected to the daemon of ``status``: its shims', and its HTTP clients'."""
    http = status.get("http") if isinstance(status.get("http"), dict) else {}
    return sum(n for n in (status.get("sessions"), http.get("sessions")) if isinstance(n, int) and n > 0)
