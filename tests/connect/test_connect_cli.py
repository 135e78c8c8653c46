"""The ``memoryd connect`` / ``disconnect`` / ``doctor`` command lines as a person runs them (real
processes, HOME pointing at a temporary home with realistic configs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import tomlkit

from conftest import build_home
from memoryd.cli.connect import safewrite
from memoryd.cli.connect.agents import SHIM_MAIN


def memoryd(
    home, *args: str, check_rc: int | None = 0, path: str | None = None
) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CONFIG_HOME", "CODEX_HOME")}
    env["HOME"] = str(home)
    if path is not None:  # a folder put first on PATH
        env["PATH"] = path + os.pathsep + env.get("PATH", "")
    result = subprocess.run(
        [sys.executable, "-m", "memoryd", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd="/",
    )
    if check_rc is not None:
        assert result.returncode == check_rc, result.stdout + result.stderr
    return result


def test_connect_without_arguments_picks_installed_agents_and_reports_each(tmp_path):
    fh = build_home(tmp_path, sys.platform if sys.platform == "darwin" else "linux")
    before = {name: safewrite.read_bytes(p) for name, p in fh.files.items()}

    dry = memoryd(fh.home, "connect", "--dry-run", check_rc=1)  # 1: some files are not ours to rewrite
    assert {name: safewrite.read_bytes(p) for name, p in fh.files.items()} == before
    assert "+[mcp_servers.memoryd]" in dry.stdout and "would change:" in dry.stdout

    out = memoryd(fh.home, "connect", check_rc=1).stdout
    for name in fh.writable:
        assert any(line.split()[:2] == [name, "connected"] for line in out.splitlines()), (name, out)
    assert "windsurf" in out and "NOT changed" in out and "paste this into" in out
    assert "Restart the agents" in out
    assert "Codex skips memoryd's hooks until you trust them: start codex, open /hooks" in out, out
    assert "Gemini CLI runs memoryd only in folders it trusts: start gemini in each project folder" in out, (
        out
    )

    status = memoryd(fh.home, "connect", "--status").stdout
    lines = {line.split()[0]: line for line in status.splitlines()}
    assert "config unreadable" in lines["windsurf"]
    assert "connected, Stop hook installed" in lines["claude-code"]
    assert all(lines[name].split()[1].rstrip(",") == "connected" for name in fh.writable)

    again = memoryd(fh.home, "connect", check_rc=1).stdout
    assert "already connected" in again
    states = [line[line.index("  ") :].lstrip() for line in again.splitlines() if "  " in line]
    assert not [s for s in states if s.startswith(("connected", "updated"))], again

    gone = memoryd(fh.home, "disconnect", check_rc=1).stdout  # 1: the broken file could not be checked
    assert "removed" in gone and "windsurf" in gone and "NOT changed" in gone
    assert {name: safewrite.read_bytes(p) for name, p in fh.files.items()} == before


def test_print_gives_snippets_that_parse_and_writes_nothing(tmp_path):
    home = tmp_path / "empty-home"
    home.mkdir()
    generic = memoryd(home, "connect", "--print", "--tools", "all").stdout
    json_part, toml_part = generic.split("# Codex CLI")
    body = json.loads(json_part[json_part.index("{") :])
    assert body["mcpServers"]["memoryd"]["args"] == ["-S", SHIM_MAIN, "--tools", "all"]
    assert os.path.isabs(body["mcpServers"]["memoryd"]["command"])
    toml_body = tomlkit.parse(toml_part.split("\n", 1)[1]).unwrap()
    assert toml_body["mcp_servers"]["memoryd"]["args"][-1] == "all"
    vscode = memoryd(home, "connect", "--print", "vscode").stdout
    assert json.loads(vscode[vscode.index("{") :])["servers"]["memoryd"]["type"] == "stdio"
    assert list(home.iterdir()) == []


def test_bad_arguments_are_refused_clearly(tmp_path):
    home = tmp_path / "h"
    home.mkdir()
    bad_tools = memoryd(home, "connect", "cursor", "--tools", "secrets", check_rc=2)
    assert "unknown tool group 'secrets'" in bad_tools.stderr
    unknown = memoryd(home, "connect", "notepad", check_rc=None)
    assert unknown.returncode != 0 and "unknown agent notepad; known: claude-code" in unknown.stderr
    meant = memoryd(home, "connect", "claude", check_rc=None)  # the command's name, not the agent's
    assert meant.returncode != 0 and "unknown agent claude; did you mean claude-code?" in meant.stderr
    nothing = memoryd(home, "connect", check_rc=1)
    assert "no agent config folder found" in nothing.stderr and list(home.iterdir()) == []


def tree(root) -> dict[str, object]:
    """Every path under ``root``: a file's bytes, a link's target, or "dir"."""
    out: dict[str, object] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = ("link", os.readlink(path))
        elif path.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = path.read_bytes()
    return out


def test_connect_all_then_disconnect_leaves_the_home_exactly_as_it_was(tmp_path):
    """Files and folders memoryd created are gone (not left as ``{}``), every other file has its old bytes,
    and no ``.memoryd-backup`` or marker stays once the files are back to what they were."""
    fh = build_home(tmp_path, sys.platform if sys.platform == "darwin" else "linux")
    (fh.home / ".cursor" / "mcp.json").unlink()  # the folder exists, the file does not yet
    (fh.dotfile).unlink()
    before = tree(tmp_path)
    memoryd(fh.home, "connect", "--all", check_rc=1)  # 1: windsurf's broken file is left alone
    created = set(tree(tmp_path)) - set(before)
    assert any(p.endswith(".memoryd-backup") for p in created) and any("/.codex" in p for p in created)
    out = memoryd(fh.home, "disconnect", check_rc=1).stdout  # 1: the broken file could not be checked
    after = tree(tmp_path)
    assert {p: after[p] for p in set(after) - set(before)} == {}, "left behind"
    assert after == before
    assert "memoryd had created this file: deleted" in out and "backup deleted" in out, out


def test_tool_groups_are_kept_and_not_reported_as_another_install(tmp_path):
    home = tmp_path / "h"
    (home / ".claude").mkdir(parents=True)
    (home / ".codex").mkdir()

    def args_of(agent: str) -> list[str]:
        if agent == "codex":
            return tomlkit.parse((home / ".codex" / "config.toml").read_text())["mcp_servers"]["memoryd"][
                "args"
            ]
        return json.loads((home / ".claude.json").read_text())["mcpServers"]["memoryd"]["args"]

    memoryd(home, "connect", "--tools", "all")
    status = memoryd(home, "connect", "--status").stdout
    lines = {line.split()[0]: line for line in status.splitlines()}
    for name in ("claude-code", "codex"):
        assert "differs" not in lines[name] and "tools all" in lines[name], status
    # connect without --tools (what the old warning advised) refreshes the entry and keeps the groups
    again = memoryd(home, "connect").stdout
    assert "keeps --tools all" in again and "updated" not in again, again
    assert args_of("claude-code")[-2:] == args_of("codex")[-2:] == ["--tools", "all"]
    # --tools still changes them
    memoryd(home, "connect", "codex", "--tools", "briefs,memo")
    assert args_of("codex")[-2:] == ["--tools", "briefs,memo"] and args_of("claude-code")[-1] == "all"
    # a real difference (another interpreter) is still reported, tool groups aside
    config = home / ".claude.json"
    data = json.loads(config.read_text())
    data["mcpServers"]["memoryd"]["command"] = "/bin/sh"
    config.write_text(json.dumps(data))
    claude = memoryd(home, "connect", "--status").stdout.splitlines()[0]
    assert "differs from this install" in claude, claude


def test_groups_written_as_tools_equals_are_kept_as_the_shim_reads_them(tmp_path):
    """The shim takes ``--tools=all`` as well as ``--tools all`` (its last one counts): connect without
    --tools keeps those groups too, and --status does not call such an entry another install."""
    home = tmp_path / "h"
    (home / ".claude").mkdir(parents=True)
    (home / ".codex").mkdir()
    python, shim = sys.executable, str(SHIM_MAIN)
    entry = {"command": python, "args": ["-S", shim, "--tools=all"]}
    (home / ".claude.json").write_text(json.dumps({"mcpServers": {"memoryd": entry}}))
    args = json.dumps(["-S", shim, "--tools", "briefs", "--tools=all"])
    (home / ".codex" / "config.toml").write_text(
        f"[mcp_servers.memoryd]\ncommand = {json.dumps(python)}\nargs = {args}\n"
    )

    out = memoryd(home, "connect", "--no-capture").stdout
    claude = json.loads((home / ".claude.json").read_text())["mcpServers"]["memoryd"]["args"]
    codex = tomlkit.parse((home / ".codex" / "config.toml").read_text())["mcp_servers"]["memoryd"]["args"]
    assert claude[-2:] == ["--tools", "all"] and list(codex)[-2:] == ["--tools", "all"], out
    assert out.count("keeps --tools all") == 2, out
    status = memoryd(home, "connect", "--status").stdout
    assert "differs" not in status and status.count("tools all") == 2, status


def test_connect_refreshing_an_entry_keeps_the_agents_own_keys_and_other_env_variables(tmp_path):
    """An entry connect rewrites (an older install, no --tools) keeps what memoryd does not manage: an
    agent's start-up timeout, tool approvals, env variables other than memoryd's own, comments."""
    home = tmp_path / "h"
    (home / ".claude").mkdir(parents=True)
    (home / ".codex").mkdir()
    old = {"command": "/old/python", "args": ["-S", "/old/shim.py"], "timeout": 30000,
           "alwaysAllow": ["search_briefs"], "env": {"HTTPS_PROXY": "http://proxy:3128"}}  # fmt: skip
    (home / ".claude.json").write_text(json.dumps({"mcpServers": {"memoryd": old}}))
    (home / ".codex" / "config.toml").write_text(
        '[mcp_servers.memoryd]\n# my notes on this entry\ncommand = "/old/python"\nargs = ["-S", "/old/shim.py"]\n'
        "# the first start builds the model\nstartup_timeout_sec = 30  # seconds\n\n"
        '[mcp_servers.memoryd.env]\nHTTPS_PROXY = "http://proxy:3128"  # the office proxy\n'
    )
    out = memoryd(home, "connect", "--no-capture").stdout
    assert out.count("updated") == 2, out
    written = (home / ".codex" / "config.toml").read_text()
    for comment in (
        "# my notes on this entry",
        "# the first start builds the model",
        "# seconds",
        "# the office",
    ):
        assert comment in written, (comment, written)  # comments inside memoryd's own table stay too
    claude = json.loads((home / ".claude.json").read_text())["mcpServers"]["memoryd"]
    codex = tomlkit.parse((home / ".codex" / "config.toml").read_text())["mcp_servers"]["memoryd"]
    assert claude["timeout"] == 30000 and claude["alwaysAllow"] == ["search_briefs"], claude
    assert codex["startup_timeout_sec"] == 30, codex
    for entry in (claude, codex):
        assert entry["command"] != "/old/python" and list(entry["args"])[-2:] == [
            "--tools",
            "briefs,memories",
        ]
        assert entry["env"]["HTTPS_PROXY"] == "http://proxy:3128", entry
        assert entry["env"]["MEMORYD_HOME"] == os.environ["MEMORYD_HOME"], entry
    again = memoryd(home, "connect", "--no-capture").stdout
    rows = {line.split()[0]: line for line in again.splitlines() if line.strip()}
    assert "updated" not in again and all("already connected" in rows[a] for a in ("claude-code", "codex")), (
        again
    )
    status = memoryd(home, "connect", "--status").stdout
    assert "differs" not in status, status


def test_a_codex_config_whose_servers_are_an_inline_table_is_connected_in_that_style(tmp_path):
    """``mcp_servers = { ... }`` on one line is valid TOML: connect adds or refreshes memoryd's entry inside
    it (a table cannot go in an inline table: connect crashed), and disconnect gives the bytes back."""
    home = tmp_path / "h"
    (home / ".codex").mkdir(parents=True)
    config = home / ".codex" / "config.toml"
    for original in (
        'mcp_servers = { other = { command = "y" } }\n',
        'mcp_servers = { memoryd = { command = "x", args = ["--tools", "all"] }, other = { command = "y" } }\n',
    ):
        config.write_text(original)
        out = memoryd(home, "connect", "codex", "--no-capture").stdout
        servers = tomlkit.parse(config.read_text())["mcp_servers"]
        assert servers["other"] == {"command": "y"} and servers["memoryd"]["command"] != "x", out
        assert "mcp_servers = {" in config.read_text(), config.read_text()
        again = memoryd(home, "connect", "codex", "--no-capture").stdout
        assert "already connected" in again, again
        memoryd(home, "disconnect", "codex")
        if "memoryd" in original:  # an entry from before: memoryd's entry goes, the backup stays
            assert tomlkit.parse(config.read_text())["mcp_servers"] == {"other": {"command": "y"}}
        else:
            assert config.read_text() == original


def test_the_tool_groups_of_an_entry_are_read_from_stdio_args_and_http_urls():
    from memoryd.cli.connect.agents import tools_of, without_tools

    assert tools_of({"command": "py", "args": ["-S", "shim.py", "--tools", "all"]}) == "all"
    assert tools_of({"command": "py", "args": ["-S", "shim.py"]}) is None
    assert tools_of({"command": "py", "args": ["--tools", "briefs", "--tools=all"]}) == "all"
    assert without_tools({"command": "py", "args": ["-S", "s.py", "--tools=all"]})["args"] == ["-S", "s.py"]
    assert (
        tools_of({"httpUrl": "http://127.0.0.1:7077/mcp?tools=briefs,memo", "headers": {}}) == "briefs,memo"
    )
    assert tools_of({"url": "http://127.0.0.1:7077/mcp"}) is None and tools_of("odd") is None
    assert without_tools({"command": "py", "args": ["-S", "s.py", "--tools", "all"]})["args"] == [
        "-S",
        "s.py",
    ]


def test_capture_off_and_on_keep_the_budget_and_a_file_memoryd_created_still_goes(tmp_path):
    home = tmp_path / "h"
    (home / ".gemini").mkdir(parents=True)  # the folder exists, settings.json does not yet
    settings = home / ".gemini" / "settings.json"

    def start_hook() -> str:
        return json.loads(settings.read_text())["hooks"]["SessionStart"][0]["hooks"][0]["command"]

    memoryd(home, "connect", "gemini", "--context-tokens", "500")
    assert start_hook().endswith("--tokens 500")
    off = memoryd(home, "capture", "off", "gemini").stdout
    assert "removed" in off and "hooks" not in json.loads(settings.read_text())
    on = memoryd(home, "capture", "on", "gemini").stdout
    assert start_hook().endswith("--tokens 500") and "keeps --context-tokens 500" in on, on
    refreshed = memoryd(home, "connect", "gemini").stdout  # replacing the hooks keeps it too
    assert start_hook().endswith("--tokens 500") and "already connected" in refreshed, refreshed
    memoryd(home, "capture", "on", "gemini", "--context-tokens", "800")
    assert start_hook().endswith("--tokens 800")
    assert not safewrite.backup_path(settings).exists()  # memoryd created the file: no "before" to keep
    out = memoryd(home, "disconnect", "gemini").stdout
    assert "memoryd had created this file: deleted" in out, out
    assert list((home / ".gemini").iterdir()) == []


def test_connect_output_keeps_its_columns_with_capture_hook_rows(tmp_path):
    home = tmp_path / "h"
    for folder in (".claude", ".codex", ".cursor"):
        (home / folder).mkdir(parents=True)
    out = memoryd(home, "connect").stdout
    rows = [line for line in out.splitlines() if "/h/" in line and not line.startswith(" ")]
    assert any("(capture hooks)" in r for r in rows) and any(r.startswith("cursor ") for r in rows), out
    columns = {r.index("connected") for r in rows}
    assert len(columns) == 1, out  # every state starts in the same column


def test_an_agent_installed_but_never_run_is_connected_by_the_bare_connect(tmp_path):
    """codex on PATH (a stand-in executable: only its presence is looked at) before it made ~/.codex: the
    bare connect creates its config as `memoryd connect codex` does, marked so disconnect removes it; an
    agent that is not installed stays untouched."""
    home, bin_dir = tmp_path / "home", tmp_path / "bin"
    home.mkdir()
    bin_dir.mkdir()
    (bin_dir / "codex").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "codex").chmod(0o755)
    (home / ".cursor").mkdir()  # one agent with a folder
    said = "installed, no config folder yet"

    status = memoryd(home, "connect", "--status", path=str(bin_dir)).stdout
    codex = next(line for line in status.splitlines() if line.startswith("codex "))
    assert "not installed" not in codex and said in codex and "connect codex` creates it" in codex, codex

    done = memoryd(home, "connect", path=str(bin_dir))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "NOT connected" not in done.stdout, done.stdout
    assert any(line.startswith("codex ") and " connected" in line for line in done.stdout.splitlines()), (
        done.stdout
    )
    config = home / ".codex" / "config.toml"
    assert "memoryd" in tomlkit.parse(config.read_text())["mcp_servers"], config.read_text()
    assert safewrite.created_path(config).is_file()
    assert not (home / ".gemini").exists() and not (home / ".claude").exists()  # not installed: left alone
    again = memoryd(home, "connect", "--status", path=str(bin_dir)).stdout
    assert said not in again, again

    out = memoryd(home, "disconnect", path=str(bin_dir)).stdout
    assert not (home / ".codex").exists(), out  # memoryd made the folder: it goes again


def _diffs(stdout: str) -> dict[str, list[str]]:
    """Each diff's file -> the lines it adds, in the order of the ``--- <path> (now)`` headers (a file
    diffed twice shows up as a list of two)."""
    out: dict[str, list[list[str]]] = {}
    current: list[str] | None = None
    for line in stdout.splitlines():
        if line.startswith("--- ") and line.endswith(" (now)"):
            current = []
            out.setdefault(line[4 : -len(" (now)")], []).append(current)
        elif line.startswith("+++ "):
            continue
        elif current is not None and line.startswith("+"):
            current.append(line[1:])
    return out


def test_a_dry_run_shows_one_diff_per_file_of_its_whole_change(tmp_path):
    # Claude Code's settings.json takes the Stop hook and the capture hooks, Gemini CLI's settings.json its
    # server entry and its hooks: each file is one diff, from what it holds now to what connect writes.
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".gemini").mkdir()
    claude, gemini = home / ".claude" / "settings.json", home / ".gemini" / "settings.json"
    dry = memoryd(home, "connect", "claude-code", "gemini", "--dry-run").stdout
    diffs = _diffs(dry)
    assert [len(diffs.get(str(p), [])) for p in (claude, gemini)] == [1, 1], dry
    assert not claude.exists() and not gemini.exists()
    assert "in the diff under claude-code (capture hooks)" in dry, dry

    memoryd(home, "connect", "claude-code", "gemini")
    for path in (claude, gemini):  # the diff of a file from nothing is the file connect writes
        assert diffs[str(path)][0] == path.read_text().splitlines(), (path, dry)

    again = memoryd(home, "disconnect", "claude-code", "gemini", "--dry-run").stdout
    assert [len(_diffs(again).get(str(p), [])) for p in (claude, gemini)] == [1, 1], again
