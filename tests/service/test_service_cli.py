"""``memoryd service ...`` drives the right ``launchctl`` / ``systemctl --user`` invocations.

Neither launchd nor a systemd user manager runs in CI, so the commands run against the recording stubs
in ``stubbin/`` (TEST STUBS, not the tools; see ``stubbin/_stub.py``), forced through
``MEMORYD_SERVICE_MANAGER`` (documented in :mod:`memoryd.cli.service.manager` as the switch for tests).
Files are really written, and the plist/units are the real rendered ones.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from memoryd.cli.main import main
from memoryd.cli.service.common import MARKER, ServiceError
from memoryd.cli.service.manager import choose, service_state
from support.daemon import DaemonProcess, short_tmpdir

UID = os.getuid()
GUI = f"gui/{UID}"
TARGET = f"{GUI}/dev.memoryd.daemon"
SHOW = "--property=LoadState,ActiveState,SubState,MainPID,UnitFileState"


def service(*args: str) -> int:
    return main(["service", *args])


def changes(calls: list[list[str]]) -> list[list[str]]:
    """The invocations that change something (without the read-only probes ``print`` / ``show``)."""
    return [c for c in calls if c[1] != "print" and (len(c) < 3 or c[2] != "show")]


@pytest.fixture
def launchd(stubs, monkeypatch):
    monkeypatch.setenv("MEMORYD_SERVICE_MANAGER", "launchd")
    return stubs


@pytest.fixture
def systemd(stubs, monkeypatch):
    monkeypatch.setenv("MEMORYD_SERVICE_MANAGER", "systemd")
    return stubs


# --- launchd --------------------------------------------------------------------------------------------


def test_launchd_install_writes_the_plist_and_bootstraps_it_once(launchd, capsys):
    plist = launchd.root.parent / "userhome" / "Library" / "LaunchAgents" / "dev.memoryd.daemon.plist"
    assert service("install") == 0
    assert changes(launchd.calls()) == [["launchctl", "bootstrap", GUI, str(plist)]]
    assert MARKER in plist.read_text()
    out = capsys.readouterr().out
    assert f"wrote {plist}" in out and f"$ launchctl bootstrap {GUI} {plist}" in out

    launchd.clear()
    assert service("install") == 0  # idempotent: nothing rewritten, nothing reloaded
    assert changes(launchd.calls()) == []
    assert "already up to date" in capsys.readouterr().out

    # An out-of-date plist (another interpreter after an upgrade, say) is rewritten and reloaded.
    plist.write_text(plist.read_text().replace("<integer>5</integer>", "<integer>7</integer>"))
    launchd.clear()
    assert service("install") == 0
    assert changes(launchd.calls()) == [
        ["launchctl", "bootout", TARGET],
        ["launchctl", "bootstrap", GUI, str(plist)],
    ]
    assert "<integer>5</integer>" in plist.read_text()


def test_launchd_start_stop_restart_status(launchd, capsys):
    assert service("install") == 0
    launchd.clear()
    assert service("restart") == 0
    assert changes(launchd.calls()) == [["launchctl", "kickstart", "-k", TARGET]]
    launchd.clear()
    assert service("stop") == 0
    assert changes(launchd.calls()) == [["launchctl", "bootout", TARGET]]
    launchd.clear()
    assert service("stop") == 0  # already stopped: nothing to do
    assert changes(launchd.calls()) == []
    assert service("start") == 0
    assert changes(launchd.calls())[0][:3] == ["launchctl", "bootstrap", GUI]
    capsys.readouterr()
    # status: launchd's view (``launchctl print``) and then `memoryd status` (no daemon answers here: 3)
    assert service("status") == 3
    out = capsys.readouterr().out
    assert "state running, pid 4242" in out and "memoryd is not running" in out
    assert ["launchctl", "print", TARGET] in launchd.calls()


def test_launchd_uninstall_removes_only_what_install_wrote(launchd, capsys):
    plist = launchd.root.parent / "userhome" / "Library" / "LaunchAgents" / "dev.memoryd.daemon.plist"
    assert service("install") == 0
    launchd.clear()
    assert service("uninstall") == 0
    assert changes(launchd.calls()) == [["launchctl", "bootout", TARGET]]
    assert not plist.exists() and plist.parent.is_dir()
    # A plist memoryd did not write is neither replaced by install nor removed by uninstall.
    plist.write_text("<plist>mine</plist>")
    assert service("install") == 1
    assert "not written by memoryd" in capsys.readouterr().err
    assert service("uninstall") == 0
    assert plist.read_text() == "<plist>mine</plist>"


# --- systemd --------------------------------------------------------------------------------------------


def test_systemd_install_writes_verifies_and_enables_both_units_once(systemd, capsys):
    units = systemd.root.parent / "userhome" / ".config" / "systemd" / "user"
    assert service("install") == 0
    assert changes(systemd.calls()) == [
        ["systemctl", "--user", "daemon-reload"],
        ["systemctl", "--user", "enable", "--now", "memoryd.socket", "memoryd.service"],
    ]
    assert MARKER in (units / "memoryd.service").read_text()
    assert MARKER in (units / "memoryd.socket").read_text()
    out = capsys.readouterr().out
    assert f"wrote {units / 'memoryd.service'}" in out and f"wrote {units / 'memoryd.socket'}" in out
    assert "$ systemctl --user enable --now memoryd.socket memoryd.service" in out

    systemd.clear()
    assert service("install") == 0
    assert changes(systemd.calls()) == []
    assert "nothing else to do" in capsys.readouterr().out


def test_systemd_start_stop_restart_uninstall(systemd):
    units = systemd.root.parent / "userhome" / ".config" / "systemd" / "user"
    assert service("install") == 0
    systemd.clear()
    assert service("restart") == 0
    assert changes(systemd.calls()) == [["systemctl", "--user", "restart", "memoryd.service"]]
    systemd.clear()
    assert service("stop") == 0
    assert changes(systemd.calls()) == [["systemctl", "--user", "stop", "memoryd.service", "memoryd.socket"]]
    systemd.clear()
    assert service("start") == 0
    assert changes(systemd.calls()) == [["systemctl", "--user", "start", "memoryd.socket", "memoryd.service"]]
    assert ["systemctl", "--user", "show", "memoryd.service", SHOW] in systemd.calls()
    systemd.clear()
    assert service("uninstall") == 0
    assert changes(systemd.calls()) == [
        ["systemctl", "--user", "disable", "--now", "memoryd.service", "memoryd.socket"],
        ["systemctl", "--user", "daemon-reload"],
    ]
    assert list(units.iterdir()) == []


def test_systemd_stderr_logs_name_the_memoryd_unit_in_the_journal(systemd, capsys):
    assert service("logs", "--stderr") == 1
    assert "journalctl --user -u memoryd.service" in capsys.readouterr().err


def test_without_a_user_service_manager_install_writes_nothing(systemd, capsys):
    (systemd.state / "no-bus").touch()
    assert service("install") == 1
    assert "loginctl enable-linger" in capsys.readouterr().err
    assert not (systemd.root.parent / "userhome" / ".config").exists()
    assert changes(systemd.calls()) == []
    state = service_state()
    assert state["running"] is None and state["fix"] is None and "cannot be asked" in state["detail"]


def test_commands_before_install_say_what_to_run(systemd, capsys):
    assert service("start") == 1
    assert "run `memoryd service install`" in capsys.readouterr().err
    assert changes(systemd.calls()) == []


# --- service_state() for memoryd doctor -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["launchd", "systemd"])
def test_service_state_reports_each_problem_with_its_fix(stubs, monkeypatch, name):
    monkeypatch.setenv("MEMORYD_SERVICE_MANAGER", name)
    state = service_state()
    assert set(state) == {"manager", "installed", "running", "detail", "fix"}
    assert state["manager"] == name and state["installed"] is False
    assert state["fix"] == "memoryd service install"
    assert service("install") == 0
    state = service_state()
    assert state["installed"] is True and state["running"] is True and state["fix"] is None, state
    assert service("stop") == 0
    state = service_state()
    assert state["running"] is False and state["fix"] == "memoryd service start", state
    # the interpreter or a location changed since install: the definition is out of date
    monkeypatch.setenv("MEMORYD_BOARD", str(stubs.root / "elsewhere"))
    state = service_state()
    assert "out of date" in state["detail"] and state["fix"] == "memoryd service install"


def test_manager_choice():
    assert choose(env={}, platform="darwin") == "launchd"
    assert choose(env={}, platform="win32") is None
    assert choose(env={"MEMORYD_SERVICE_MANAGER": "systemd"}, platform="darwin") == "systemd"
    with pytest.raises(ServiceError, match="launchd or systemd"):
        choose(env={"MEMORYD_SERVICE_MANAGER": "upstart"})


# --- through the real console script, and with a real daemon -------------------------------------------------


def test_the_console_script_prints_exactly_what_it_did(launchd):
    env = dict(os.environ)
    out = subprocess.run(
        [sys.executable, "-m", "memoryd", "service", "install"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    plist = f"{env['HOME']}/Library/LaunchAgents/dev.memoryd.daemon.plist"
    lines = out.stdout.splitlines()
    assert lines[0] == f"wrote {plist}"
    assert lines[1] == f"$ launchctl bootstrap {GUI} {plist}"
    assert lines[2].startswith("installed: logs go to ")
    assert [json.loads(x)["argv"] for x in launchd.log.read_text().splitlines()][-1] == [
        "launchctl",
        "bootstrap",
        GUI,
        plist,
    ]


def test_install_stops_a_daemon_a_shim_started_so_the_service_owns_the_socket(systemd, monkeypatch, capsys):
    root = short_tmpdir()
    daemon = DaemonProcess(root)
    try:
        daemon.start()
        monkeypatch.setenv("MEMORYD_SOCKET", str(daemon.socket))  # the service's socket is that daemon's
        assert service("install") == 0
        assert daemon.wait_exit(15) == 0  # a clean stop (SIGTERM), not a kill
        out = capsys.readouterr().out
        assert f"stopping the memoryd daemon started outside the service (pid {daemon.proc.pid})" in out
        assert out.index("stopping the memoryd daemon") < out.index("$ systemctl --user enable --now")
    finally:
        daemon.kill()
        if daemon.proc is not None and daemon.proc.poll() is None:
            os.kill(daemon.proc.pid, signal.SIGKILL)


@pytest.fixture
def no_init(stubs, monkeypatch):
    """Linux whose PID 1 is not systemd (containers, WSL without systemd): ``systemctl`` is on PATH but
    says ``offline``; the manager is chosen as for a user, not forced."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the choice of systemd is made on Linux only")
    monkeypatch.delenv("MEMORYD_SERVICE_MANAGER", raising=False)
    (stubs.state / "no-init").touch()
    return stubs


@pytest.mark.parametrize("verb", ["install", "start", "stop", "restart"])
def test_without_systemd_as_init_every_command_says_there_is_nothing_to_install(no_init, capsys, verb):
    assert service(verb) == 1
    err = capsys.readouterr().err
    assert "no service manager memoryd can use" in err and "Nothing needs installing" in err, err
    assert " serve`" in err and " serve --http PORT`" in err, err
    assert "loginctl" not in err and "run `memoryd service install`" not in err, err
    assert all(c[1:] == ["is-system-running"] for c in no_init.calls()), no_init.calls()
    assert service_state()["manager"] is None and service_state()["fix"] is None


def test_without_systemd_as_init_connect_http_says_to_serve_http_by_hand(no_init, capsys, tmp_path):
    (tmp_path / "userhome" / ".gemini").mkdir()
    assert main(["connect", "--http", "--no-capture", "gemini"]) == 0
    err = capsys.readouterr().err
    assert " serve --http 7077`" in err and "service install" not in err, err


def test_systemd_without_a_user_session_keeps_the_linger_advice(stubs, monkeypatch, capsys):
    if not sys.platform.startswith("linux"):
        pytest.skip("the choice of systemd is made on Linux only")
    monkeypatch.delenv("MEMORYD_SERVICE_MANAGER", raising=False)
    (stubs.state / "no-bus").touch()
    assert service("install") == 1
    assert "loginctl enable-linger" in capsys.readouterr().err


def test_without_systemd_as_init_doctor_says_it_once_and_suggests_no_service_command(no_init, capsys):
    main(["doctor"])
    out = capsys.readouterr().out
    assert out.count("no service manager memoryd can use") == 1, out
    assert "service install" not in out and "service start" not in out, out
