"""``memoryd doctor`` on the capture hooks (real processes, HOME pointing at a temporary home): installed and
well-formed per agent, runnable, the digest budget; what Codex and Gemini CLI need to run them (feature
switches, Codex's hook trust, Gemini's version and trusted folders); and this shell's MEMORYD_* values."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memoryd.cli.connect.capturecheck import trusted_folder

AGENTS = ("claude-code", "codex", "gemini")


def env_for(home: Path, tmp: Path, **extra: str) -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(
        p for p in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep) if p != venv_bin
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "MEMORYD_", "CODEX_"))}
    return {**env, "HOME": str(home), "PATH": path, "MEMORYD_HOME": str(tmp / "mh"), **extra}


def memoryd(env: dict, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memoryd", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=180)  # fmt: skip


def checks(env: dict, cwd: Path) -> tuple[int, dict[str, dict]]:
    done = memoryd(env, cwd, "doctor", "--json")
    return done.returncode, {c["name"]: c for c in json.loads(done.stdout)["checks"]}


def run_fix(check: dict, env: dict, cwd: Path) -> None:
    assert check["command"] and check["fix"].startswith(check["command"]), check
    done = subprocess.run(["/bin/sh", "-c", check["command"]], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=180)  # fmt: skip
    assert done.returncode == 0, (check, done.stdout, done.stderr)


@pytest.fixture
def setup(tmp_path):
    """A home with Claude Code, Codex and Gemini CLI connected with capture (budget 800 for Claude Code),
    a project folder Gemini CLI trusts, and no ``gemini`` on PATH."""
    home, project = tmp_path / "h", tmp_path / "project"
    for folder in (".claude", ".codex", ".gemini"):
        (home / folder).mkdir(parents=True)
    project.mkdir()
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(project): "TRUST_FOLDER"}))
    env = env_for(home, tmp_path)
    for agent in AGENTS:
        budget = ["--context-tokens", "800"] if agent == "claude-code" else []
        assert memoryd(env, project, "connect", agent, *budget).returncode == 0
    return home, project, env


def test_connected_capture_hooks_are_checked_run_and_their_budget_reported(setup):
    home, project, env = setup
    code, found = checks(env, project)
    assert code == 0, found
    for agent in AGENTS:
        assert found[f"capture {agent}"]["state"] == "ok", found[f"capture {agent}"]
        assert "the hook runs" in found[f"capture {agent}"]["detail"]
    assert "budget 800 tokens" in found["capture claude-code"]["detail"]
    assert "budget not set: the default, 1,500 tokens" in found["capture codex"]["detail"]
    assert found["capture gemini enabled"]["state"] == "ok"
    assert "version not checked" in found["capture gemini enabled"]["detail"]
    assert found["gemini folder trust"]["state"] == "ok"
    # Codex has recorded no trust for these hooks yet: a warning with what to do, not a failure
    assert found["codex hook trust"]["state"] == "warn" and "/hooks" in found["codex hook trust"]["fix"]


def test_a_missing_or_broken_hook_is_a_problem_whose_fix_keeps_the_budget(setup):
    home, project, env = setup
    settings = home / ".claude" / "settings.json"
    doc = json.loads(settings.read_text())
    stop = doc["hooks"]["Stop"]  # memoryd's capture group goes; the older Stop hook stays
    doc["hooks"]["Stop"] = [g for g in stop if "memoryd_shim.hooks" not in g["hooks"][0]["command"]]
    settings.write_text(json.dumps(doc))
    code, found = checks(env, project)
    check = found["capture claude-code"]
    assert code == 1 and check["state"] == "problem" and "Stop: missing" in check["detail"]
    assert check["command"].endswith("capture on claude-code --context-tokens 800")
    run_fix(check, env, project)
    code, found = checks(env, project)
    assert code == 0 and "budget 800 tokens" in found["capture claude-code"]["detail"]


def test_a_hook_whose_interpreter_is_gone_or_that_fails_is_a_problem(setup):
    home, project, env = setup
    hooks = home / ".codex" / "hooks.json"
    text = hooks.read_text()
    python = json.loads(text)["hooks"]["Stop"][0]["hooks"][0]["command"].split(" -m ")[0]
    hooks.write_text(text.replace(python, "/gone/bin/python"))
    check = checks(env, project)[1]["capture codex"]
    assert check["state"] == "problem" and "/gone/bin/python" in check["detail"], check
    hooks.write_text(text.replace(python, "/bin/false"))  # exists, but the hook does not run
    check = checks(env, project)[1]["capture codex"]
    assert check["state"] == "problem" and "fails when run: exit 1" in check["detail"], check
    run_fix(check, env, project)
    assert checks(env, project)[1]["capture codex"]["state"] == "ok"


def test_agents_switches_that_stop_every_hook_are_problems(setup):
    home, project, env = setup
    config = home / ".codex" / "config.toml"
    config.write_text(config.read_text() + "\n[features]\nhooks = false\n")
    gemini = home / ".gemini" / "settings.json"
    doc = json.loads(gemini.read_text())
    doc["hooksConfig"] = {"enabled": False}
    gemini.write_text(json.dumps(doc))
    code, found = checks(env, project)
    assert code == 1
    assert found["capture codex enabled"]["state"] == "problem"
    assert "hooks = false" in found["capture codex enabled"]["detail"]
    assert found["capture gemini enabled"]["state"] == "problem"
    assert "hooksConfig.enabled is false" in found["capture gemini enabled"]["detail"]
    doc["hooksConfig"] = {"disabled": ["memoryd-BeforeAgent"]}
    gemini.write_text(json.dumps(doc))
    check = checks(env, project)[1]["capture gemini enabled"]
    assert check["state"] == "problem" and "memoryd-BeforeAgent" in check["detail"]


def test_codex_trust_recorded_for_each_hook_counts_as_trusted(setup):
    home, project, env = setup
    hooks_json = home / ".codex" / "hooks.json"
    labels = ("user_prompt_submit", "stop", "session_start", "pre_compact")
    table = "".join(
        f'\n[hooks.state."{hooks_json}:{label}:0:0"]\ntrusted_hash = "sha256:00"\n' for label in labels
    )
    config = home / ".codex" / "config.toml"
    before = memoryd(env, project, "connect", "--status").stdout
    codex = next(line for line in before.splitlines() if line.startswith("codex "))
    assert "capture on once trusted" in codex, before  # as doctor warns: Codex skips untrusted hooks
    assert checks(env, project)[1]["codex hook trust"]["state"] == "warn"
    config.write_text(config.read_text() + table)
    assert checks(env, project)[1]["codex hook trust"]["state"] == "ok"
    after = memoryd(env, project, "connect", "--status").stdout
    codex = next(line for line in after.splitlines() if line.startswith("codex "))
    assert "capture on" in codex and "once trusted" not in codex, after


def test_gemini_version_below_the_hooks_minimum_is_a_problem(setup, tmp_path):
    home, project, env = setup
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "gemini"  # stands in for an old Gemini CLI: only its --version answer matters here
    for version, state in (("0.25.2", "problem"), ("0.61.0", "ok")):
        fake.write_text(f"#!/bin/sh\necho {version}\n")
        fake.chmod(0o755)
        check = checks({**env, "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}"}, project)[1][
            "capture gemini enabled"
        ]
        assert check["state"] == state and version in check["detail"], check


def test_an_untrusted_gemini_folder_is_a_warning_with_what_to_do(setup, tmp_path):
    home, project, env = setup
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code, found = checks(env, elsewhere)
    check = found["gemini folder trust"]
    assert code == 0 and check["state"] == "warn", check
    assert "MCP server disabled" in check["detail"] and "Trust folder" in check["fix"]
    text = memoryd(env, elsewhere, "doctor").stdout
    assert "warn  gemini folder trust" in text and "No problems. 2 warning(s)" in text  # and Codex's trust
    assert (
        checks({**env, "GEMINI_CLI_TRUST_WORKSPACE": "true"}, elsewhere)[1]["gemini folder trust"]["state"]
        == "ok"
    )
    (home / ".gemini" / "trustedFolders.json").write_text("{not json")
    check = checks(env, project)[1]["gemini folder trust"]
    assert check["state"] == "problem" and "refuses to start" in check["detail"]


def test_gemini_trust_rules_longest_match_parent_and_distrust(tmp_path):
    a = tmp_path / "a"
    (a / "b" / "c").mkdir(parents=True)
    env: dict[str, str] = {}
    assert trusted_folder(str(a / "b"), {}, env) is None
    assert trusted_folder(str(a / "b" / "c"), {str(a / "b"): "TRUST_FOLDER"}, env) is True
    assert trusted_folder(str(a), {str(a / "b"): "TRUST_PARENT"}, env) is True
    rules = {str(a): "TRUST_FOLDER", str(a / "b"): "DO_NOT_TRUST"}
    assert trusted_folder(str(a / "b" / "c"), rules, env) is False
    assert (
        trusted_folder(str(tmp_path / "ab"), {str(a): "TRUST_FOLDER"}, env) is None
    )  # a prefix, not a parent
    assert trusted_folder(str(a), {}, {"GEMINI_CLI_TRUST_WORKSPACE": "true"}) is True


def test_status_and_doctor_report_an_unusable_setting(tmp_path):
    home = tmp_path / "h"
    home.mkdir()
    env = env_for(home, tmp_path, MEMORYD_TOOL_TIMEOUT_MS="abc", MEMORYD_DEBOUNCE_MS="99999")
    status = memoryd(env, tmp_path, "status")
    assert status.returncode == 3
    assert (
        "settings  MEMORYD_TOOL_TIMEOUT_MS must be an integer from 100 to 600000, not 'abc'" in status.stdout
    )
    assert "MEMORYD_DEBOUNCE_MS=99999 is outside 0 to 10000: 10000 is used" in status.stdout
    shown = json.loads(memoryd(env, tmp_path, "status", "--json").stdout)["settings"]
    assert [(s["variable"], s["state"]) for s in shown] == [
        ("MEMORYD_TOOL_TIMEOUT_MS", "refused"),
        ("MEMORYD_DEBOUNCE_MS", "clamped"),
    ]
    code, found = checks(env, tmp_path)
    assert code == 1 and found["settings"]["state"] == "problem"
    assert found["settings"]["command"].startswith("unset MEMORYD_TOOL_TIMEOUT_MS")
    env.pop("MEMORYD_TOOL_TIMEOUT_MS")
    code, found = checks(env, tmp_path)
    assert code == 0 and found["settings"]["state"] == "info"


def test_a_gemini_settings_file_with_comments_is_fixed_by_the_snippet_not_by_connect(tmp_path):
    """connect leaves a JSONC settings file alone and prints the entry to paste; doctor must give that fix,
    not ``memoryd connect gemini``, which would refuse again."""
    home, project = tmp_path / "h", tmp_path / "project"
    (home / ".gemini").mkdir(parents=True)
    project.mkdir()
    (home / ".gemini" / "settings.json").write_text('{\n  // my theme\n  "theme": "Dracula"\n}\n')
    env = env_for(home, tmp_path)
    refused = memoryd(env, project, "connect", "gemini")
    assert "NOT changed" in refused.stdout + refused.stderr, (refused.stdout, refused.stderr)
    _, found = checks(env, project)
    gemini = found["agent gemini"]
    assert "has comments" in gemini["detail"], gemini
    assert gemini["command"].endswith("connect --print gemini"), gemini
    run_fix(gemini, env, project)
    printed = subprocess.run(["/bin/sh", "-c", gemini["command"]], capture_output=True, text=True, env=env,
                             cwd=project, timeout=180)  # fmt: skip
    assert "memoryd" in printed.stdout and "mcpServers" in printed.stdout, printed.stdout


def test_bare_doctor_warns_of_an_agent_config_connect_will_not_edit_and_keeps_absent_agents_info(tmp_path):
    """A commented or unparsable config is something the user can fix: a warning with its fix line in the
    bare doctor (not an info line under "No problems"); an agent with no config stays quiet or info."""
    home, project = tmp_path / "h", tmp_path / "project"
    for folder in (".gemini", ".codeium/windsurf", ".cursor"):
        (home / folder).mkdir(parents=True)
    project.mkdir()
    (home / ".gemini" / "settings.json").write_text('{\n  // my theme\n  "theme": "Dracula"\n}\n')
    (home / ".codeium" / "windsurf" / "mcp_config.json").write_text('{"mcpServers": ')
    env = env_for(home, tmp_path)
    refused = memoryd(env, project, "connect", "gemini")
    assert "NOT changed" in refused.stdout + refused.stderr, (refused.stdout, refused.stderr)
    code, found = checks(env, project)
    assert found["agent gemini"]["state"] == "warn" and found["agent gemini"]["command"], found[
        "agent gemini"
    ]
    assert found["agent windsurf"]["state"] == "warn", found["agent windsurf"]
    assert found["agent cursor"]["state"] == "info", found["agent cursor"]
    text = memoryd(env, project, "doctor").stdout
    gemini = next(line for line in text.splitlines() if "agent gemini" in line)
    assert gemini.startswith("warn"), text
    assert "connect --print gemini" in text.split(gemini, 1)[1].splitlines()[1], text
    assert "warning(s)" in text, text


def test_doctor_lines_keep_one_column_for_the_details_whatever_the_check_names(setup, tmp_path):
    home, project, env = setup
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "gemini"  # only its --version answer matters: it adds "capture gemini enabled"
    fake.write_text("#!/bin/sh\necho 0.61.0\n")
    fake.chmod(0o755)
    (home / ".gemini" / "trustedFolders.json").unlink()  # an untrusted folder: a warning with a fix line
    env = {**env, "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}"}
    done = memoryd(env, project, "doctor")
    names = set(checks(env, project)[1])
    lines = [ln for ln in done.stdout.splitlines() if ln[:4] in ("ok  ", "FAIL", "warn", "info")]
    assert any("capture gemini enabled" in ln for ln in lines) and any(
        "fix: " in ln for ln in done.stdout.splitlines()
    )
    columns = set()
    for line in lines:
        name = next(n for n in sorted(names, key=len, reverse=True) if line[6:].startswith(n))
        columns.add(len(line) - len(line[6 + len(name) :].lstrip(" ")))
    columns |= {ln.index("fix: ") for ln in done.stdout.splitlines() if ln.lstrip().startswith("fix: ")}
    assert len(columns) == 1, done.stdout
