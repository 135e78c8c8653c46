"""Every behaviour setting is one entry of ``VARS``: default, range, help; read once; bad values refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from memoryd.settings import VARS, Settings, SettingsError, check_env

README = Path(__file__).resolve().parents[1] / "README.md"


def test_defaults_come_from_the_table(tmp_path):
    s = Settings.load(env={"MEMORYD_HOME": str(tmp_path)})
    for var in VARS:
        assert getattr(s, var.field) == var.default, var.env


def test_values_are_read_clamped_to_their_range_and_flags_win(tmp_path):
    env = {
        "MEMORYD_HOME": str(tmp_path),
        "MEMORYD_TOOL_TIMEOUT_MS": "30000",
        "MEMORYD_DEBOUNCE_MS": "99999999",
        "MEMORYD_OPTIMIZE_INTERVAL_S": "0",
        "MEMORYD_LOG_LEVEL": "WARNING",
        "MEMORYD_TEST_TOOLS": "1",
        "MEMORYD_MODEL": "none",
    }
    s = Settings.load(env=env, model="other")
    assert (s.tool_timeout_ms, s.debounce_ms, s.optimize_interval_s) == (30000, 10_000, 1)
    assert (s.log_level, s.test_tools, s.model) == ("warning", True, "other")


@pytest.mark.parametrize(
    ("name", "value"),
    [("MEMORYD_TOOL_TIMEOUT_MS", "15s"), ("MEMORYD_LOCK_WAIT_MS", "x"), ("MEMORYD_LOG_LEVEL", "loud")],
)
def test_an_unusable_value_is_refused_naming_the_variable(tmp_path, name, value):
    with pytest.raises(SettingsError, match=name):
        Settings.load(env={"MEMORYD_HOME": str(tmp_path), name: value})


@pytest.mark.parametrize("value", ["65536", "-1", "99999999999"])
def test_a_port_outside_its_range_is_refused_not_clamped(tmp_path, value):
    env = {"MEMORYD_HOME": str(tmp_path), "MEMORYD_HTTP_PORT": value}
    with pytest.raises(SettingsError, match="MEMORYD_HTTP_PORT must be an integer from 0 to 65535"):
        Settings.load(env=env)
    assert check_env(env) == [
        (
            "MEMORYD_HTTP_PORT",
            "refused",
            f"MEMORYD_HTTP_PORT must be an integer from 0 to 65535, not {value!r}",
        )
    ]
    with pytest.raises(SettingsError, match="from 0 \\(off\\) to 65535"):
        Settings.load(env={"MEMORYD_HOME": str(tmp_path)}, http_port=int(value))


@pytest.mark.parametrize("command", [["serve", "--model", "none"], ["service", "install", "--print"]])
@pytest.mark.parametrize("value", ["65536", "-1", "99999999999", "http"])
def test_an_http_flag_outside_the_port_range_is_a_usage_error(tmp_path, command, value):
    env = {"MEMORYD_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    run = subprocess.run(
        [sys.executable, "-m", "memoryd", *command, "--http", value],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (
        run.returncode == 2 and f"--http: must be a port from 0 (off) to 65535, not {value!r}" in run.stderr
    )
    assert "Traceback" not in run.stderr


def test_a_command_reports_an_unusable_value_without_a_traceback(tmp_path):
    env = {"MEMORYD_HOME": str(tmp_path), "MEMORYD_TOOL_TIMEOUT_MS": "soon", "PATH": "/usr/bin:/bin"}
    run = subprocess.run(
        [sys.executable, "-m", "memoryd", "search", "x", "--model", "none"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and "MEMORYD_TOOL_TIMEOUT_MS must be an integer" in run.stderr
    assert "Traceback" not in run.stderr and run.stdout == ""


def test_the_daemon_refuses_an_unusable_value_at_start(tmp_path):
    env = {"MEMORYD_HOME": str(tmp_path), "MEMORYD_LOCK_WAIT_MS": "later", "PATH": "/usr/bin:/bin"}
    run = subprocess.run(
        [sys.executable, "-m", "memoryd", "serve", "--model", "none", "--socket", str(tmp_path / "s.sock")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1 and "MEMORYD_LOCK_WAIT_MS" in run.stderr


def test_the_readme_lists_every_setting():
    text = README.read_text()
    missing = [v.env for v in VARS if v.env not in text]
    assert not missing, f"README's Configuration table lacks {missing}"
