"""Linux: the systemd user units ``memoryd.service`` + ``memoryd.socket``, driven through ``systemctl --user``.

Commands (systemctl(1))::

    install    write ~/.config/systemd/user/memoryd.{service,socket}, systemd-analyze --user verify,
               systemctl --user daemon-reload, systemctl --user enable --now memoryd.socket memoryd.service
    uninstall  systemctl --user disable --now memoryd.service memoryd.socket, remove the units (only
               ours), systemctl --user daemon-reload
    start      systemctl --user start memoryd.socket memoryd.service
    stop       systemctl --user stop memoryd.service memoryd.socket   (the socket too: else the next
               agent's connect would start it again)
    restart    systemctl --user restart memoryd.service   (the socket stays: no connection is refused)
    state      systemctl --user show memoryd.service -p LoadState,ActiveState,SubState,MainPID,UnitFileState
"""

from __future__ import annotations

import os
from pathlib import Path

from memoryd.cli.service import templates
from memoryd.cli.service.common import UNIT, Actions, ServiceError, atomic_write, is_ours, read_text, run
from memoryd.cli.service.state import ManagerState, stop_foreign_daemon

SERVICE = f"{UNIT}.service"
SOCKET = f"{UNIT}.socket"
_PROPS = "LoadState,ActiveState,SubState,MainPID,UnitFileState"


def unit_dir() -> Path:
    """``$XDG_CONFIG_HOME/systemd/user``, else ``~/.config/systemd/user`` (systemd.unit(5) user paths)."""
    base = os.environ.get("XDG_CONFIG_HOME")
    return (Path(base) if base and os.path.isabs(base) else Path.home() / ".config") / "systemd" / "user"


def _systemctl(*args: str) -> list[str]:
    return ["systemctl", "--user", *args]


class SystemdManager:
    """One user's memoryd units. ``actions`` reports every file written and command run."""

    name = "systemd"

    def __init__(self, ctx: templates.Context, actions: Actions) -> None:
        self.ctx = ctx
        self.actions = actions

    def files(self) -> list[Path]:
        """What :meth:`install` writes."""
        return [unit_dir() / SERVICE, unit_dir() / SOCKET]

    def rendered(self) -> dict[Path, str]:
        return {unit_dir() / name: text for name, text in templates.render_units(self.ctx).items()}

    # --- state --------------------------------------------------------------------------------------

    def _show(self, unit: str) -> dict[str, str] | None:
        probe = run(_systemctl("show", unit, f"--property={_PROPS}"), None)
        if not probe.ok:
            return None
        return dict(line.split("=", 1) for line in probe.out.splitlines() if "=" in line)

    def state(self) -> ManagerState:
        """What systemd says about the units (``systemctl --user show``; a silent probe)."""
        files = self.files()
        installed = all(is_ours(path) for path in files)
        current = installed and all(read_text(p) == text for p, text in self.rendered().items())
        service = self._show(SERVICE)
        if service is None:
            return ManagerState(
                installed,
                current,
                None,
                None,
                None,
                "systemctl --user cannot reach the user's service manager",
            )
        socket = self._show(SOCKET) or {}
        loaded = service.get("LoadState") == "loaded"
        running = service.get("ActiveState") == "active"
        pid = int(service["MainPID"]) if service.get("MainPID", "0").isdigit() else 0
        detail = (
            f"systemd {SERVICE}: {service.get('ActiveState', '?')} ({service.get('SubState', '?')}), "
            f"{service.get('UnitFileState') or 'not installed'}; {SOCKET}: {socket.get('ActiveState', '?')}"
        )
        if pid:
            detail += f"; pid {pid}"
        return ManagerState(installed, current, loaded, running, pid or None, detail)

    def enabled(self) -> bool:
        service, socket = self._show(SERVICE) or {}, self._show(SOCKET) or {}
        return service.get("UnitFileState") == "enabled" and socket.get("UnitFileState") == "enabled"

    # --- commands -----------------------------------------------------------------------------------

    def install(self) -> None:
        """Write (atomically), verify, load, enable and start both units; idempotent."""
        rendered = self.rendered()
        if self._show(SERVICE) is None:  # before writing anything: nothing could load the units
            probe = run(_systemctl("show", SERVICE), None)
            raise ServiceError(
                f"systemctl --user cannot reach your user service manager ({probe.explain()}); run this "
                "from a login session with systemd --user, or enable it with `loginctl enable-linger $USER`"
            )
        for path in rendered:
            if path.exists() and not is_ours(path):
                raise ServiceError(
                    f"{path} exists and was not written by memoryd; move it away and run "
                    "`memoryd service install` again"
                )
        self.ctx.locations.logs.mkdir(mode=0o700, parents=True, exist_ok=True)
        changed = [path for path, text in rendered.items() if read_text(path) != text]
        originals = {path: read_text(path) for path in changed}
        for path in changed:
            atomic_write(path, rendered[path])
            self.actions(f"wrote {path}")
        for path in set(rendered) - set(changed):
            self.actions(f"{path} is already up to date")
        try:
            note = templates.verify_units(list(rendered))
        except ServiceError:
            for path, text in originals.items():  # never leave units systemd would reject
                if text is None:
                    path.unlink(missing_ok=True)
                else:
                    atomic_write(path, text)
            raise
        self.actions(note or "systemd-analyze --user verify: no problems")
        before = self.state()
        if not changed and before.running and self.enabled():
            self.actions(f"{SERVICE} is already enabled and running; nothing else to do")
            return
        if changed:
            run(_systemctl("daemon-reload"), self.actions, check=True)
        stop_foreign_daemon(self.ctx.locations.socket, before.pid, self.actions)
        run(_systemctl("enable", "--now", SOCKET, SERVICE), self.actions, check=True)
        if changed and before.running:
            run(_systemctl("restart", SERVICE), self.actions, check=True)  # pick up the new unit

    def uninstall(self) -> None:
        """Stop and disable both units and remove the files install wrote; board, index and logs stay."""
        if self.state().loaded:
            run(_systemctl("disable", "--now", SERVICE, SOCKET), self.actions, check=True)
        removed = False
        for path in self.files():
            if is_ours(path):
                path.unlink()
                self.actions(f"removed {path}")
                removed = True
            elif path.exists():
                self.actions(f"left {path}: it was not written by memoryd")
            else:
                self.actions(f"{path} is not installed; nothing to remove")
        if removed:
            run(_systemctl("daemon-reload"), self.actions, check=True)

    def start(self) -> None:
        st = self._installed_state()
        stop_foreign_daemon(self.ctx.locations.socket, st.pid, self.actions)
        run(_systemctl("start", SOCKET, SERVICE), self.actions, check=True)

    def stop(self) -> None:
        self._installed_state()
        run(_systemctl("stop", SERVICE, SOCKET), self.actions, check=True)

    def restart(self) -> None:
        st = self._installed_state()
        if not st.running:
            self.start()
            return
        run(_systemctl("restart", SERVICE), self.actions, check=True)

    def _installed_state(self) -> ManagerState:
        return self.state().require_installed(f"the systemd units are not installed ({unit_dir()})")

    def crash_log_hint(self) -> str:
        return f"crashes (stderr): journalctl --user -u {UNIT}"
