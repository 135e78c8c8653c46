"""What both managers report (:class:`ManagerState`), and taking over from a daemon started outside the
service (by a shim or by hand) so the service manager can own the socket."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from memoryd.cli.service.common import Actions, ServiceError

FOREIGN_STOP_WAIT_S = 10.0


@dataclass(frozen=True)
class ManagerState:
    """The service manager's view.

    ``installed``: our definition files exist (carry the marker); ``current``: they match what
    ``install`` would write now (same interpreter and paths); ``loaded``/``running``: the manager has
    the job/unit loaded and its process runs (``None``: the manager could not be asked); ``pid``: the
    service's process; ``detail``: one line for people.
    """

    installed: bool
    current: bool
    loaded: bool | None
    running: bool | None
    pid: int | None
    detail: str

    def require_installed(self, missing: str) -> ManagerState:
        """This state when the service is installed; else :class:`ServiceError` saying ``missing`` (what is
        not there) and that ``memoryd service install`` makes it."""
        if not self.installed:
            raise ServiceError(f"{missing}; run `memoryd service install`")
        return self


def stop_foreign_daemon(socket_path: Path, service_pid: int | None, actions: Actions) -> None:
    """Stop a memoryd daemon that answers on ``socket_path`` but is not the service's process.

    A shim starts a daemon when none answers; before launchd/systemd take the socket over, that daemon
    gets SIGTERM (a clean stop: it removes its socket file; agents' shims reconnect on their own) and
    up to :data:`FOREIGN_STOP_WAIT_S` to exit. Nothing happens when no daemon answers.
    """
    from memoryd.serve.control import ask_status

    try:
        status = ask_status(socket_path)
    except ValueError:
        return
    pid = status.get("pid") if status else None
    if not isinstance(pid, int) or pid == service_pid or status.get("activation"):
        return
    actions(
        f"stopping the memoryd daemon started outside the service (pid {pid}) so the service owns {socket_path}"
    )
    from memoryd.cli.stop import terminate

    try:
        if terminate(pid, FOREIGN_STOP_WAIT_S):
            return
    except PermissionError:
        actions(f"pid {pid} is not yours to stop; the service may fail to start")
        return
    actions(f"pid {pid} did not stop within {FOREIGN_STOP_WAIT_S:g} s; the service may fail to start")
