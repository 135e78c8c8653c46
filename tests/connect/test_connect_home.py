"""``memoryd connect`` / ``disconnect`` on a temporary HOME with realistic configs for every agent.

Checked for each file: after connect it holds exactly memoryd's entry plus everything it had, and the
bytes outside the entry are unchanged (one contiguous insertion); unparsable and JSONC files are not
touched at all; disconnect gives back the original bytes; a second connect writes nothing; the backup is
made once and keeps the original; the symlinked dotfile stays a symlink and its target is what changes.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import pytest
import tomlkit

from conftest import FakeHome
from memoryd.cli.connect import edits, manage, safewrite
from memoryd.cli.connect.agents import SHIM_MAIN, claude_settings, hook_command, known_agents, server_entry


def agents_of(fh: FakeHome):
    agents = {a.name: a for a in known_agents(home=fh.home, platform=fh.platform, env={"HOME": str(fh.home)})}
    assert set(agents) == set(fh.files), "every agent in the table has a fixture file"
    for name, path in fh.files.items():
        assert agents[name].config == path
    return agents


def parsed(agent, data: bytes):
    text = data.decode()
    return tomlkit.parse(text).unwrap() if agent.fmt == "toml" else json.loads(text)


def with_entry(agent, value, entry):
    value = copy.deepcopy(value)
    node = value
    for step in agent.container:
        node = node.setdefault(step, {})
    node["memoryd"] = entry
    return value


def one_insertion(old: bytes, new: bytes) -> bool:
    """``new`` is ``old`` with one contiguous run of bytes inserted somewhere."""
    prefix = 0
    while prefix < len(old) and prefix < len(new) and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < len(old) - prefix and old[len(old) - 1 - suffix] == new[len(new) - 1 - suffix]:
        suffix += 1
    return prefix + suffix == len(old) and len(new) > len(old)


def snapshot(fh: FakeHome, settings):
    paths = [*fh.files.values(), settings]
    return {p: (safewrite.read_bytes(p), os.stat(p).st_mtime_ns) for p in paths}


def leftovers(fh: FakeHome) -> list[str]:
    return [str(p) for p in fh.home.parent.rglob("*.tmp")]


def test_connect_disconnect_keep_everything_else(fake_home: FakeHome):
    fh = fake_home
    agents = agents_of(fh)
    server = server_entry()
    settings = claude_settings(fh.home)
    before = snapshot(fh, settings)

    outcomes = {o.agent: o for a in agents.values() for o in manage.connect(a, server, capture=False)}
    assert not leftovers(fh)

    for name, agent in agents.items():
        old = before[agent.config][0]
        new = safewrite.read_bytes(agent.config)
        outcome = outcomes[name]
        if name in fh.untouched:
            assert outcome.state == manage.SKIPPED and outcome.snippet, outcome
            assert new == old and os.stat(agent.config).st_mtime_ns == before[agent.config][1]
            assert not safewrite.backup_path(agent.config).exists()
            # The snippet is what the user pastes: valid JSON holding the entry.
            assert json.loads(outcome.snippet)[agent.container[0]]["memoryd"] == agent.entry(server)
            continue
        assert outcome.state == manage.CONNECTED and outcome.backup, outcome
        entry = agent.entry(server)
        assert parsed(agent, new) == with_entry(agent, parsed(agent, old), entry), name
        assert one_insertion(old, new), f"{name}: bytes outside memoryd's entry changed"
        assert safewrite.backup_path(agent.config).read_bytes() == old
    assert outcomes["claude-code"].backup and outcomes["vscode" if fh.platform == "darwin" else "codex"].ok
    if fh.platform == "darwin":
        assert (
            parsed(agents["vscode"], safewrite.read_bytes(agents["vscode"].config))["servers"]["memoryd"][
                "type"
            ]
            == "stdio"
        )
    assert (
        "type"
        not in parsed(agents["cursor"], safewrite.read_bytes(agents["cursor"].config))["mcpServers"][
            "memoryd"
        ]
    )

    # The symlinked dotfile: still a link to the same target, and the target holds the change.
    cursor = fh.files["cursor"]
    assert cursor.is_symlink() and os.readlink(cursor) == str(fh.dotfile)
    assert b"memoryd_shim" in fh.dotfile.read_bytes()
    assert not (fh.dotfile.parent / "mcp.json.memoryd-backup").exists()  # the backup sits beside the link

    # Claude Code's Stop hook: added beside the other Stop hook, the rest of settings.json byte for byte.
    old_settings, new_settings = before[settings][0], settings.read_bytes()
    assert one_insertion(old_settings, new_settings)
    stop = json.loads(new_settings)["hooks"]["Stop"]
    assert stop[0] == json.loads(old_settings)["hooks"]["Stop"][0]
    assert stop[1] == edits.hook_group(hook_command(server["command"], server.get("env")))

    # Second connect: nothing is written, not even the same bytes again.
    after_first = snapshot(fh, settings)
    backups = {
        p: safewrite.backup_path(p).read_bytes() for p in after_first if safewrite.backup_path(p).exists()
    }
    again = [o for a in agents.values() for o in manage.connect(a, server, capture=False)]
    assert {o.state for o in again} <= {manage.UNCHANGED, manage.SKIPPED}
    assert snapshot(fh, settings) == after_first

    # Status reads every agent the way it is now.
    states = {name: manage.status(a, server) for name, a in agents.items()}
    for name in fh.writable:
        assert states[name].state == "connected", states[name]
    assert states["windsurf"].state == "config unreadable"
    if fh.platform != "darwin":
        assert states["vscode"].state == "not connected"  # JSONC is read (leniently) for status
    assert states["claude-code"].hook == "installed"

    # Disconnect: every file is back to its original bytes, so its backup has done its job and goes.
    gone = [o for a in agents.values() for o in manage.disconnect(a)]
    assert {o.agent for o in gone if o.state == manage.REMOVED} == fh.writable | {"claude-code (Stop hook)"}
    for path, (old, _mtime) in before.items():
        assert safewrite.read_bytes(path) == old, path
    assert fh.files["cursor"].is_symlink()
    assert not list(fh.home.parent.rglob("*.memoryd-backup")) and not list(
        fh.home.parent.rglob("*.memoryd-created")
    )
    assert {
        name: manage.status(a).state for name, a in agents.items() if name in fh.writable
    } == dict.fromkeys(fh.writable, "not connected")

    # Connect again after disconnect: the new backups hold the same originals.
    for agent in agents.values():
        manage.connect(agent, server, capture=False)
    for path, data in backups.items():
        assert safewrite.backup_path(path).read_bytes() == data
    assert not leftovers(fh)


def test_dry_run_writes_nothing_and_shows_the_diff(fake_home: FakeHome):
    fh = fake_home
    agents = agents_of(fh)
    settings = claude_settings(fh.home)
    before = snapshot(fh, settings)
    outcomes = [
        o for a in agents.values() for o in manage.connect(a, server_entry(), dry_run=True, capture=False)
    ]
    assert snapshot(fh, settings) == before
    assert not list(fh.home.rglob("*.memoryd-backup"))
    diffs = {o.agent: o.diff for o in outcomes if o.state == manage.WOULD_CHANGE}
    assert set(diffs) == fh.writable | {"claude-code (Stop hook)"}
    assert '+    "memoryd": {' in diffs["claude-code"] and "+[mcp_servers.memoryd]" in diffs["codex"]
    assert all(line[0] in "+ @-" for d in diffs.values() for line in d.splitlines() if line)


def test_files_that_do_not_exist_yet_are_created_and_removed_again(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    agents = {a.name: a for a in known_agents(home=home, platform="linux", env={"HOME": str(home)})}
    server = server_entry(tools="briefs,memo")
    for name in ("codex", "gemini"):
        [outcome] = manage.connect(agents[name], server, capture=False)
        assert outcome.state == manage.CONNECTED
        assert oct(os.stat(agents[name].config).st_mode & 0o777) == "0o600"
        entry = manage.edits.read_entry(
            agents[name].config.read_text(), agents[name].fmt, agents[name].container
        )
        assert entry["args"] == ["-S", SHIM_MAIN, "--tools", "briefs,memo"]
        assert not safewrite.backup_path(agents[name].config).exists()  # nothing from before to keep
        assert json.loads(safewrite.created_path(agents[name].config).read_text()) == {
            "dirs": [str(agents[name].config.parent)]
        }
        [gone] = manage.disconnect(agents[name])
        assert gone.state == manage.REMOVED and "created" in gone.detail
    assert list(tmp_path.iterdir()) == [home] and list(home.iterdir()) == []  # files, markers, folders gone


def test_a_fresh_home_is_left_as_it_was_with_capture_hooks_and_the_stop_hook_in_one_file(tmp_path):
    # Claude Code's settings.json gets two memoryd entries (the Stop hook and the capture hooks), Gemini's one
    # file the MCP entry and the capture hooks: each removal but the last leaves memoryd's own entry behind.
    home = tmp_path / "home"
    home.mkdir()
    agents = {a.name: a for a in known_agents(home=home, platform="linux", env={"HOME": str(home)})}
    server = server_entry()
    for name in ("claude-code", "codex", "gemini"):
        outcomes = manage.connect(agents[name], server)
        assert all(o.state == manage.CONNECTED for o in outcomes), outcomes
    assert (home / ".claude" / "settings.json").exists() and (home / ".gemini" / "settings.json").exists()
    for name in ("claude-code", "codex", "gemini"):
        for outcome in manage.disconnect(agents[name]):
            assert outcome.state in (manage.REMOVED, manage.UNCHANGED), outcome
    left = sorted(str(p.relative_to(home)) for p in home.rglob("*"))
    assert left == [], f"disconnect left {left} in a home that had none of it"


def test_a_file_memoryd_created_stays_once_it_holds_more_than_memoryds_entry(tmp_path):
    home = tmp_path / "home"
    (home / ".cursor").mkdir(parents=True)
    cursor = next(a for a in known_agents(home=home, env={"HOME": str(home)}) if a.name == "cursor")
    manage.connect(cursor, server_entry(), capture=False)
    value = json.loads(cursor.config.read_text())
    value["mcpServers"]["playwright"] = {"command": "npx"}  # Cursor adds a server of its own
    cursor.config.write_text(json.dumps(value, indent=2))
    [gone] = manage.disconnect(cursor)
    assert gone.state == manage.REMOVED
    assert json.loads(cursor.config.read_text()) == {"mcpServers": {"playwright": {"command": "npx"}}}
    assert sorted(p.name for p in (home / ".cursor").iterdir()) == ["mcp.json"]  # the file is the user's now


def test_a_backup_stays_while_the_file_differs_from_it(tmp_path):
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    gemini = next(a for a in known_agents(home=home, env={"HOME": str(home)}) if a.name == "gemini")
    gemini.config.write_text('{\n  "theme": "Dracula"\n}\n')
    manage.connect(gemini, server_entry(), capture=False)
    gemini.config.write_text(gemini.config.read_text().replace("Dracula", "GitHub"))  # the user's edit
    [gone] = manage.disconnect(gemini)
    assert gone.state == manage.REMOVED and "settings.json.memoryd-backup" in gone.detail
    assert "is kept" in gone.detail
    assert gemini.config.read_text() == '{\n  "theme": "GitHub"\n}\n'
    assert safewrite.backup_path(gemini.config).read_text() == '{\n  "theme": "Dracula"\n}\n'


def test_a_temp_file_left_by_a_killed_connect_goes_at_the_next_write(tmp_path):
    home = tmp_path / "home"
    (home / ".cursor").mkdir(parents=True)
    cursor = next(a for a in known_agents(home=home, env={"HOME": str(home)}) if a.name == "cursor")
    writer = subprocess.Popen([sys.executable, "-c", "pass"])
    writer.wait()  # a pid that no longer runs, like a connect killed mid-write
    stale = home / ".cursor" / f".mcp.json.memoryd-{writer.pid}.tmp"
    alive = home / ".cursor" / f".mcp.json.memoryd-{os.getppid()}.tmp"  # a writer still running
    theirs = home / ".cursor" / ".mcp.json.tmp"
    for path in (stale, alive, theirs):
        path.write_text("{")
    manage.connect(cursor, server_entry(), capture=False)
    assert not stale.exists() and alive.exists() and theirs.exists()


def test_a_stale_entry_is_reported_and_connect_fixes_it(tmp_path):
    home = tmp_path / "home"
    cursor = next(
        a for a in known_agents(home=home, platform="linux", env={"HOME": str(home)}) if a.name == "cursor"
    )
    cursor.config.parent.mkdir(parents=True)
    moved = {"command": str(tmp_path / "old-venv" / "bin" / "python"), "args": ["-m", "memoryd_shim"]}
    cursor.config.write_text(
        json.dumps({"mcpServers": {"memoryd": moved, "other": {"command": "npx"}}}, indent=2)
    )
    state = manage.status(cursor, server_entry())
    assert state.state == "entry stale" and "old-venv" in state.detail
    [outcome] = manage.connect(cursor, server_entry(), capture=False)
    assert outcome.state == manage.UPDATED
    value = json.loads(cursor.config.read_text())
    assert value["mcpServers"]["memoryd"] == server_entry() and value["mcpServers"]["other"] == {
        "command": "npx"
    }
    assert list(value["mcpServers"]) == ["memoryd", "other"]  # replaced in place, key order kept
    assert manage.status(cursor, server_entry()).state == "connected"


@pytest.mark.parametrize("kind", ["jsonc", "unparsable", "not an object", "servers not an object"])
def test_files_that_are_not_ours_to_rewrite_are_left_alone(tmp_path, kind):
    home = tmp_path / "home"
    gemini = next(
        a for a in known_agents(home=home, platform="linux", env={"HOME": str(home)}) if a.name == "gemini"
    )
    text = {
        "jsonc": '{\n  "theme": "Dracula", /* dark */\n}\n',
        "unparsable": '{"theme": "Dracula"',
        "not an object": '["theme"]\n',
        "servers not an object": '{"mcpServers": ["x"]}\n',
    }[kind]
    gemini.config.parent.mkdir(parents=True)
    gemini.config.write_text(text)
    [outcome] = manage.connect(gemini, server_entry(), capture=False)
    assert outcome.state == manage.SKIPPED and "left untouched" in outcome.detail
    assert json.loads(outcome.snippet)["mcpServers"]["memoryd"] == server_entry()
    assert gemini.config.read_text() == text
    assert not safewrite.backup_path(gemini.config).exists()


def test_capture_hooks_connect_and_disconnect_byte_exactly(fake_home: FakeHome):
    from memoryd.cli.connect import capturehooks

    fh = fake_home
    agents = agents_of(fh)
    server = server_entry()
    settings = claude_settings(fh.home)
    before = snapshot(fh, settings)
    outcomes = {o.agent: o for a in agents.values() for o in manage.connect(a, server, tokens=900)}
    for name in ("claude-code", "codex", "gemini"):
        if name in fh.untouched:
            continue
        assert outcomes[f"{name} (capture hooks)"].state == manage.CONNECTED, outcomes
        path = capturehooks.hooks_file(name, agents[name].folder)
        installed = capturehooks.read(path.read_text())
        assert set(installed) == set(capturehooks.EVENTS[name])
        assert installed["SessionStart"].endswith(f"{name} SessionStart --tokens 900")
        assert manage.capture_state(agents[name]) == "on"
    claude_hooks = json.loads(settings.read_bytes())["hooks"]
    assert claude_hooks["Stop"][0] == json.loads(before[settings][0])["hooks"]["Stop"][0]  # theirs, first
    again = [o for a in agents.values() for o in manage.connect(a, server, tokens=900)]
    assert {o.state for o in again} <= {manage.UNCHANGED, manage.SKIPPED}
    off = manage.disconnect_capture(agents["claude-code"])
    assert off is not None and off.state == manage.REMOVED
    assert manage.capture_state(agents["claude-code"]) == "off"
    for a in agents.values():
        manage.disconnect(a)
    for path, (old, _mtime) in before.items():
        assert safewrite.read_bytes(path) == old, path
    assert not (agents["codex"].folder / "hooks.json").exists()
    assert not list(fh.home.parent.rglob("*.memoryd-backup"))


def test_an_entry_whose_shim_file_is_gone_is_stale(tmp_path):
    """A checkout moved after connect: the interpreter still exists, the shim's file does not."""
    agent = next(a for a in known_agents(tmp_path) if a.name == "cursor")
    agent.config.parent.mkdir(parents=True)
    gone = str(tmp_path / "old-checkout" / "shim" / "memoryd_shim" / "__main__.py")
    agent.config.write_text(
        json.dumps({"mcpServers": {"memoryd": {"command": sys.executable, "args": ["-S", gone]}}})
    )
    state = manage.status(agent)
    assert state.state == "entry stale" and "old-checkout" in state.detail
    agent.config.write_text(json.dumps({"mcpServers": {"memoryd": server_entry()}}))
    assert manage.status(agent).state == "connected"
