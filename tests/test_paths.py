"""Every location from one rule (contract §2)."""

from __future__ import annotations

from pathlib import Path

import platformdirs

from memoryd.paths import resolve
from memoryd_shim import rendezvous


def test_memoryd_home_puts_everything_under_one_folder(tmp_path):
    loc = resolve(env={"MEMORYD_HOME": str(tmp_path)})
    assert loc.board == tmp_path / "data" / "board"
    assert loc.index == tmp_path / "data" / "index"
    assert loc.models == tmp_path / "cache" / "models"
    assert loc.socket == tmp_path / "state" / "memoryd.sock"
    assert loc.log_file == tmp_path / "logs" / "memoryd.log"


def test_single_overrides_and_flags_win(tmp_path):
    env = {
        "MEMORYD_HOME": str(tmp_path),
        "MEMORYD_BOARD": "/b",
        "MEMORYD_INDEX": "/i",
        "MEMORYD_MODELS": "/m",
        "MEMORYD_SOCKET": "/s.sock",
    }
    loc = resolve(env=env)
    assert (loc.board, loc.index, loc.models, loc.socket) == (
        Path("/b"),
        Path("/i"),
        Path("/m"),
        Path("/s.sock"),
    )
    loc = resolve(board="/flag-board", index="/flag-index", socket="/flag.sock", env=env)
    assert (loc.board, loc.index, loc.socket) == (
        Path("/flag-board"),
        Path("/flag-index"),
        Path("/flag.sock"),
    )


def test_default_socket_is_platformdirs_state_dir_from_home_alone(tmp_path, monkeypatch):
    monkeypatch.delenv("MEMORYD_HOME", raising=False)
    for var in ("XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    loc = resolve(env={"HOME": str(tmp_path)})
    assert loc.socket == Path(platformdirs.user_state_dir("memoryd", appauthor=False)) / "memoryd.sock"
    assert loc.socket == rendezvous.socket_path({"HOME": str(tmp_path)})


def test_long_socket_path_falls_back_to_tmp(tmp_path):
    deep = tmp_path / ("x" * 120)
    assert rendezvous.socket_path({"MEMORYD_HOME": str(deep)}) == rendezvous.fallback_socket_path(
        deep / "state" / "memoryd.sock"
    )


def test_daemon_and_shim_compute_the_same_fallback_socket_and_one_per_home(tmp_path):
    homes = [tmp_path / ("x" * 120) / "a", tmp_path / ("x" * 120) / "b"]
    daemon_side = [resolve(env={"MEMORYD_HOME": str(h)}).socket for h in homes]
    shim_side = [rendezvous.socket_path_str({"MEMORYD_HOME": str(h)}) for h in homes]
    assert [str(p) for p in daemon_side] == shim_side
    assert daemon_side[0] != daemon_side[1]
    assert all(p.parent == Path(rendezvous.fallback_dir_str()) for p in daemon_side)


def test_every_board_has_its_own_default_index(tmp_path):
    env = {"MEMORYD_HOME": str(tmp_path)}
    default = resolve(env=env)
    assert default.index == tmp_path / "data" / "index"  # contract §2: the default board's
    assert resolve(board=tmp_path / "data" / "board", env=env).index == default.index
    one, two = (resolve(board=tmp_path / name / "board", env=env).index for name in ("one", "two"))
    assert one != two and one.parent == two.parent == tmp_path / "cache" / "indexes"
    assert one.name.startswith("board-") and len(one.name) == len("board-") + 8
    assert resolve(board=tmp_path / "one" / "board", env=env).index == one  # the same board: the same index
    assert resolve(env={**env, "MEMORYD_BOARD": str(tmp_path / "one" / "board")}).index == one
    assert resolve(board=tmp_path / "one" / "board", index="/i", env=env).index == Path("/i")
    odd = resolve(board=tmp_path / "a b:c", env=env).index
    assert odd.name.startswith("a_b_c-")
