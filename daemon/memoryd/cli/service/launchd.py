"""macOS: the LaunchAgent ``dev.memoryd.daemon`` in the user's GUI domain, driven through ``launchctl``.

Commands (launchctl(1), the "new" subcommands since macOS 10.10)::

    install    write ~/Library/LaunchAgents/dev.memoryd.daemon.plist, then  launchctl bootstrap gui/<uid> <plist>
    uninstall  launchctl bootout gui/<uid>/dev.memoryd.daemon, then remove the plist (only ours)
    start      launchctl bootstrap gui/<uid> <plist> (when not loaded), launchctl kickstart gui/<uid>/<label>
    stop       launchctl bootout gui/<uid>/dev.memoryd.daemon   (RunAtLoad brings it back at next login)
    restart    launchctl kickstart -k gui/<uid>/dev.memoryd.daemon
    state      launchctl print gui/<uid>/dev.memoryd.daemon   (exit 113 when the job is not loaded)
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from memoryd.cli.service import templates
from memoryd.cli.service.common import LABEL, Actions, ServiceError, atomic_write, is_ours, read_text, run
from memoryd.cli.service.state import ManagerState, stop_foreign_daemon


class LaunchdManager:
    """One user's LaunchAgent. ``actions`` reports every file written and command run."""

    name = "launchd"

    def __init__(self, ctx: templates.Context, actions: Actions) -> None:
        self.ctx = ctx
        self.actions = actions
        self.domain = f"gui/{os.getuid()}"
        self.target = f"{self.domain}/{LABEL}"

    @property
    def plist_path(self) -> Path:
        return Path.home() / "Library" / "LaunchAgents" / f"{LABEL}.plist"

    def files(self) -> list[Path]:
        """What :meth:`install` writes."""
        return [self.plist_path]

    def rendered(self) -> dict[Path, str]:
        """The validated definitions install would write, by path."""
        text = templates.render_plist(self.ctx)
        templates.validate_plist(text, self.ctx)
        return {self.plist_path: text}

    # --- state --------------------------------------------------------------------------------------

    def state(self) -> ManagerState:
        """What launchd says about the job (``launchctl print``; a silent probe)."""
        installed = is_ours(self.plist_path)
        current = installed and read_text(self.plist_path) == self.rendered()[self.plist_path]
        probe = run(["launchctl", "print", self.target], None)
        if probe.code == 127:
            return ManagerState(installed, current, None, None, None, "launchctl is not available")
        if not probe.ok:
            return ManagerState(installed, current, False, False, None, "not loaded in launchd")
        fields = dict(re.findall(r"^\s*(state|pid|last exit code) = (.+?)\s*$", probe.out, re.MULTILINE))
        pid = int(fields["pid"]) if fields.get("pid", "").isdigit() else None
        state = fields.get("state", "unknown")
        detail = f"launchd job {LABEL}: state {state}"
        if pid:
            detail += f", pid {pid}"
        if fields.get("last exit code"):
            detail += f", last exit {fields['last exit code']}"
        return ManagerState(installed, current, True, state == "running", pid, detail)

    # --- commands -----------------------------------------------------------------------------------

    def install(self) -> None:
        """Write (atomically) and load the LaunchAgent; re-running it changes nothing when up to date."""
        text = self.rendered()[self.plist_path]
        existing = read_text(self.plist_path)
        if existing is not None and not is_ours(self.plist_path):
            raise ServiceError(
                f"{self.plist_path} exists and was not written by memoryd; move it away and run "
                "`memoryd service install` again"
            )
        for folder in (self.ctx.locations.logs, self.ctx.locations.socket.parent):
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)  # launchd creates no parent folders
        changed = existing != text
        if changed:
            atomic_write(self.plist_path, text)
            self.actions(f"wrote {self.plist_path}")
        else:
            self.actions(f"{self.plist_path} is already up to date")
        before = self.state()
        if before.loaded and not changed:
            self.actions(f"{LABEL} is already loaded; nothing else to do")
            return
        if before.loaded:
            run(["launchctl", "bootout", self.target], self.actions, check=True)  # reload the new plist
        stop_foreign_daemon(self.ctx.locations.socket, None, self.actions)
        run(["launchctl", "bootstrap", self.domain, str(self.plist_path)], self.actions, check=True)

    def uninstall(self) -> None:
        """Unload the job and remove the plist if install wrote it; the board, index and logs stay."""
        if self.state().loaded:
            run(["launchctl", "bootout", self.target], self.actions, check=True)
        if is_ours(self.plist_path):
            self.plist_path.unlink()
            self.actions(f"removed {self.plist_path}")
        elif self.plist_path.exists():
            self.actions(f"left {self.plist_path}: it was not written by memoryd")
        else:
            self.actions(f"{self.plist_path} is not installed; nothing to remove")

    def start(self) -> None:
        st = self._installed_state()
        if not st.loaded:
            stop_foreign_daemon(self.ctx.locations.socket, None, self.actions)
            run(["launchctl", "bootstrap", self.domain, str(self.plist_path)], self.actions, check=True)
            st = self.state()
        if not st.running:
            run(["launchctl", "kickstart", self.target], self.actions, check=True)
        else:
            self.actions(f"{LABEL} is already running (pid {st.pid})")

    def stop(self) -> None:
        if not self._installed_state().loaded:
            self.actions(f"{LABEL} is not loaded; nothing to stop")
            return
        run(["launchctl", "bootout", self.target], self.actions, check=True)

    def restart(self) -> None:
        if not self._installed_state().loaded:
            self.start()
            return
        run(["launchctl", "kickstart", "-k", self.target], self.actions, check=True)

    def _installed_state(self) -> ManagerState:
        return self.state().require_installed(f"the LaunchAgent is not installed ({self.plist_path})")

    # --- logs ---------------------------------------------------------------------------------------

    def crash_log_hint(self) -> str:
        return f"crashes (stderr): {self.ctx.stderr_file}"
