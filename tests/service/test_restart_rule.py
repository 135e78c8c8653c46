"""The service managers' restart rule for a daemon refused because another one already serves.

systemd's unit says ``RestartPreventExitStatus=4`` and the daemon exits 4. launchd's ``KeepAlive`` has no
per-status key (only ``SuccessfulExit``, ``Crashed``, ``PathState``, ``OtherJobEnabled``,
``NetworkState``...): the LaunchAgent sets ``MEMORYD_SUPERVISOR=launchd`` and that same refusal exits 0,
which ``KeepAlive {SuccessfulExit: false}`` does not restart. Neither manager runs here, so the daemon is
started exactly as the rendered plist says (its program arguments, environment and working directory)
while a real daemon serves the same socket.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from memoryd.cli.service import templates
from memoryd.errors import EXIT_ALREADY_RUNNING
from memoryd.serve import daemon as server
from support.daemon import DaemonProcess, short_tmpdir

SUPERVISOR_ENV = "MEMORYD_SUPERVISOR"


@pytest.fixture
def agent():
    """A home and a short socket, the plist rendered for them, and a daemon already serving there."""
    root = short_tmpdir()
    home = root / "home"
    env = {"HOME": str(root), "MEMORYD_HOME": str(home), "MEMORYD_SOCKET": str(root / "s.sock")}
    ctx = templates.Context.current(env=env, platform="darwin")
    plist = templates.validate_plist(templates.render_plist(ctx), ctx)
    penv = plist["EnvironmentVariables"]
    first = DaemonProcess(
        root,
        socket_path=Path(penv["MEMORYD_SOCKET"]),
        board=Path(penv["MEMORYD_BOARD"]),
        index=Path(penv["MEMORYD_INDEX"]),
    )
    try:
        first.start()
        yield plist, first, ctx
    finally:
        first.kill()
        shutil.rmtree(root, ignore_errors=True)


def launch_as_the_plist_says(plist: dict, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        plist["ProgramArguments"],
        env=env,
        cwd=plist["WorkingDirectory"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_under_launchd_a_daemon_refused_because_one_serves_exits_0(agent):
    plist, first, ctx = agent
    assert plist["KeepAlive"] == {"SuccessfulExit": False}  # exit 0 is what launchd leaves alone
    env = plist["EnvironmentVariables"]
    done = launch_as_the_plist_says(plist, env)
    assert done.returncode == 0, done.stderr
    assert env[SUPERVISOR_ENV] == "launchd"
    assert server.SUPERVISOR_ENV == templates.SUPERVISOR_ENV == SUPERVISOR_ENV
    assert done.stdout == ""
    assert "already running" in done.stderr and "exit 0, so that launchd does not restart it" in done.stderr
    logged = [json.loads(line) for line in Path(env["MEMORYD_LOG_FILE"]).read_text().splitlines()]
    refused = [line for line in logged if line["event"] == "startup_refused"]
    assert len(refused) == 1 and refused[0]["exit_code"] == 0 and refused[0]["supervisor"] == "launchd"
    assert str(first.socket) in refused[0]["reason"]
    assert first.status()["pid"] == first.proc.pid  # the one that serves keeps serving


def test_elsewhere_the_same_refusal_still_exits_4_which_the_systemd_unit_does_not_restart(agent):
    plist, first, ctx = agent
    env = {k: v for k, v in plist["EnvironmentVariables"].items() if k != SUPERVISOR_ENV}
    done = launch_as_the_plist_says(plist, env)
    assert done.returncode == EXIT_ALREADY_RUNNING, done.stderr
    assert "already running" in done.stderr
    unit = templates.render_units(templates.Context(ctx.python, ctx.locations, "linux", ctx.home))
    service = unit[templates.SERVICE_TEMPLATE]
    assert "RestartPreventExitStatus=4" in service.splitlines() and SUPERVISOR_ENV not in service
    assert first.status()["pid"] == first.proc.pid
    assert os.path.exists(first.socket)
