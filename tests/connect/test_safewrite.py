"""The write rules for files that belong to other apps: through symlinks, temp file + rename, mode kept,
backup once, read back before the change counts, and nothing written over a file that changed meanwhile."""

from __future__ import annotations

import json
import os

import pytest

from memoryd.cli.connect import manage, safewrite
from memoryd.cli.connect.agents import claude_settings, known_agents, server_entry


def test_mode_is_kept_and_the_backup_is_made_once(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b"one")
    os.chmod(path, 0o640)
    assert safewrite.write(path, b"two", b"one", lambda data: data == b"two") is True
    assert path.read_bytes() == b"two" and oct(os.stat(path).st_mode & 0o777) == "0o640"
    assert safewrite.write(path, b"three", b"two", lambda data: True) is False
    assert safewrite.backup_path(path).read_bytes() == b"one"
    assert oct(os.stat(safewrite.backup_path(path)).st_mode & 0o777) == "0o600"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "config.json.memoryd-backup"]


def test_a_file_changed_meanwhile_is_not_overwritten(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b"the agent wrote this after we read")
    with pytest.raises(safewrite.ChangedMeanwhile):
        safewrite.write(path, b"ours", b"what we read", lambda data: True)
    assert path.read_bytes() == b"the agent wrote this after we read"
    assert not safewrite.backup_path(path).exists()


def test_a_write_that_does_not_read_back_is_undone(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b"old")
    with pytest.raises(safewrite.VerifyFailed):
        safewrite.write(path, b"new", b"old", lambda data: False)
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_symlinks_are_written_through_and_dangling_ones_refused(tmp_path):
    target = tmp_path / "dotfiles" / "mcp.json"
    target.parent.mkdir()
    target.write_bytes(b"old")
    link = tmp_path / "mcp.json"
    link.symlink_to(target)
    safewrite.write(link, b"new", b"old", lambda data: data == b"new")
    assert link.is_symlink() and target.read_bytes() == b"new"
    dangling = tmp_path / "gone.json"
    dangling.symlink_to(tmp_path / "missing.json")
    with pytest.raises(safewrite.WriteError, match="symlink to a missing file"):
        safewrite.write(dangling, b"x", None, lambda data: True)
    assert not (tmp_path / "missing.json").exists()


def test_an_unreadable_claude_config_gets_no_stop_hook(tmp_path):
    home = tmp_path / "home"
    claude = next(a for a in known_agents(home=home, env={"HOME": str(home)}) if a.name == "claude-code")
    (home / ".claude").mkdir(parents=True)
    claude.config.write_text('{"numStartups": 3,')
    settings = claude_settings(home)
    settings.write_text(json.dumps({"model": "opus"}))
    outcomes = manage.connect(claude, server_entry())
    assert [o.state for o in outcomes] == [manage.SKIPPED]
    assert json.loads(settings.read_text()) == {"model": "opus"}
    assert manage.status(claude).state == "config unreadable"
