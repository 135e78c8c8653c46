"""The LaunchAgent plist and the systemd units: rendered with absolute paths for this interpreter, valid
(plistlib round trip; ``systemd-analyze verify`` when installed), one source shipped in the wheel."""

from __future__ import annotations

import os
import plistlib
import shutil
import sys
import tomllib
from pathlib import Path

import pytest

from memoryd.cli.service import templates
from memoryd.cli.service.common import LABEL, MARKER, ServiceError

REPO = Path(__file__).resolve().parents[2]


def test_templates_come_from_the_one_launchd_folder_that_the_wheel_ships():
    folder = templates.template_dir()
    assert folder == REPO / "launchd"  # a checkout / editable install reads the source folder itself
    for name in (templates.PLIST_TEMPLATE, templates.SERVICE_TEMPLATE, templates.SOCKET_TEMPLATE):
        assert (folder / name).is_file()
    # The wheel maps that same folder to the place template_dir() looks first in an installed package.
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    include = config["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    assert include == {"launchd": "memoryd/_service_templates"}


def test_plist_has_absolute_paths_for_this_interpreter_and_survives_a_round_trip(isolated_home):
    ctx = templates.Context.current(platform="darwin")
    text = templates.render_plist(ctx)
    assert MARKER in text
    plist = templates.validate_plist(text, ctx)
    assert plistlib.loads(plistlib.dumps(plist)) == plist
    assert plist["Label"] == LABEL == "dev.memoryd.daemon"
    assert plist["ProgramArguments"] == [sys.executable, "-m", "memoryd", "serve"]
    assert os.path.isabs(plist["ProgramArguments"][0])
    env = plist["EnvironmentVariables"]
    home = isolated_home
    assert env["MEMORYD_HOME"] == str(home)
    assert env["MEMORYD_BOARD"] == str(home / "data" / "board")
    assert env["MEMORYD_SOCKET"] == str(home / "state" / "memoryd.sock")
    assert env["MEMORYD_LOG_FILE"] == str(home / "logs" / "memoryd.log")
    assert all(os.path.isabs(env[k]) for k in env if k.startswith("MEMORYD_") and k != "MEMORYD_SUPERVISOR")
    assert env["MEMORYD_SUPERVISOR"] == "launchd"  # "already running" exits 0 under launchd (see below)
    assert env["LANG"] == env["LC_ALL"] == "en_US.UTF-8" and env["LANCEDB_LOG"] == "error"
    assert env["PATH"] == "/usr/bin:/bin:/usr/sbin:/sbin"
    assert plist["RunAtLoad"] is True
    assert plist["KeepAlive"] == {"SuccessfulExit": False}  # restart after a crash, not after a clean stop
    assert isinstance(plist["ThrottleInterval"], int) and plist["ThrottleInterval"] > 0
    assert plist["ProcessType"] == "Adaptive"
    assert plist["StandardErrorPath"] == plist["StandardOutPath"] == str(home / "logs" / "memoryd.stderr.log")
    assert plist["Sockets"] == {
        "Listeners": {"SockPathName": str(home / "state" / "memoryd.sock"), "SockPathMode": 0o600}
    }


def test_plist_escapes_awkward_paths(monkeypatch, tmp_path):
    awkward = tmp_path / "a & b <c> 'd' %e"
    monkeypatch.setenv("MEMORYD_BOARD", str(awkward))
    ctx = templates.Context.current(platform="darwin")
    plist = templates.validate_plist(templates.render_plist(ctx), ctx)
    assert plist["EnvironmentVariables"]["MEMORYD_BOARD"] == str(awkward)


def test_a_broken_plist_is_refused():
    ctx = templates.Context.current(platform="darwin")
    text = templates.render_plist(ctx)
    with pytest.raises(ServiceError, match="does not parse"):
        templates.validate_plist(text.replace("</dict>\n</plist>", "</plist>"), ctx)
    with pytest.raises(ServiceError, match="not an absolute path"):
        templates.validate_plist(
            text.replace(f"<string>{sys.executable}</string>", "<string>python3</string>"), ctx
        )


def write_units(ctx, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in templates.render_units(ctx).items():
        (folder / name).write_text(text)
        paths.append(folder / name)
    return paths


def test_units_have_absolute_paths_and_the_socket(isolated_home, tmp_path):
    ctx = templates.Context.current(platform="linux")
    units = templates.render_units(ctx)
    service, socket_unit = units["memoryd.service"], units["memoryd.socket"]
    assert MARKER in service and MARKER in socket_unit
    assert f'ExecStart="{sys.executable}" -m memoryd serve' in service
    assert f'Environment="MEMORYD_SOCKET={isolated_home}/state/memoryd.sock"' in service
    assert f'Environment="MEMORYD_LOG_FILE={isolated_home}/logs/memoryd.log"' in service
    assert "LANG=C.UTF-8 LC_ALL=C.UTF-8" in service and "LANCEDB_LOG=error" in service
    assert "Restart=on-failure" in service  # a crash restarts it; a clean stop (exit 0) does not
    assert f"ListenStream={isolated_home}/state/memoryd.sock" in socket_unit
    assert "SocketMode=0600" in socket_unit and "DirectoryMode=0700" in socket_unit


def test_units_pass_systemd_analyze_verify(tmp_path, monkeypatch):
    if shutil.which("systemd-analyze") is None:
        pytest.skip(
            "systemd-analyze is not installed (apt-get install systemd); the units cannot be verified"
        )
    monkeypatch.setenv("MEMORYD_BOARD", str(tmp_path / '50% of $HOME "board"'))  # specifiers, quotes
    ctx = templates.Context.current(platform="linux")
    paths = write_units(ctx, tmp_path / "units")
    note = templates.verify_units(paths)
    if note is not None:
        pytest.skip(note)
    # and the check really checks: an unknown key and a bad value in our unit are reported
    service = paths[0]
    service.write_text(service.read_text().replace("Type=simple", "Type=bogus\nFrobnicate=yes"))
    with pytest.raises(ServiceError, match="Frobnicate"):
        templates.verify_units(paths)


def test_a_socket_path_with_spaces_cannot_go_into_listen_stream(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMORYD_SOCKET", str(tmp_path / "with space.sock"))
    with pytest.raises(ServiceError, match="MEMORYD_SOCKET"):
        templates.render_units(templates.Context.current(platform="linux"))
