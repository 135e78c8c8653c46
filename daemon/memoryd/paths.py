"""Every location memoryd uses, from one rule (contract §2).

Precedence per location: explicit argument (``--board`` etc.) > its own environment variable >
``MEMORYD_HOME`` > platformdirs' user dirs for app ``memoryd``. The socket rule itself lives in
:mod:`memoryd_shim.rendezvous` because the shim must compute it from ``HOME`` alone.

Without ``--index``/``MEMORYD_INDEX`` every board has its own index (:func:`default_index`): the default
board ``<data>/board`` keeps ``<data>/index``, any other board gets one under ``<cache>/indexes``, so
serving or searching another board never rewrites the index of the first, and switching back re-embeds
nothing. Which board an index belongs to is recorded in the index itself (:mod:`memoryd.index.lock`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from memoryd_shim import rendezvous

APP = rendezvous.APP_NAME


@dataclass(frozen=True)
class Locations:
    """Resolved absolute paths. ``log_file`` is used only when run as a service."""

    data: Path
    state: Path
    cache: Path
    logs: Path
    board: Path
    index: Path
    models: Path
    socket: Path
    exports: Path

    @property
    def log_file(self) -> Path:
        return self.logs / "memoryd.log"

    @property
    def lock_file(self) -> Path:
        return self.socket.parent / (self.socket.name + ".lock")


#: Characters of a board folder's name kept in its index folder's name (the rest become "_").
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def default_index(board: Path, data: Path, cache: Path) -> Path:
    """The index of ``board`` when none is given: ``<data>/index`` for the default board
    ``<data>/board``; else ``<cache>/indexes/<board folder name>-<8 hex of SHA-256(board path)>``.

    ``board`` is absolute (as :func:`resolve` makes it); the hash tells apart boards of the same name.
    """
    if board == data / "board":
        return data / "index"
    name = _UNSAFE.sub("_", board.name)[:40] or "board"
    key = hashlib.sha256(os.fsencode(board)).hexdigest()[:8]
    return cache / "indexes" / f"{name}-{key}"


def _env_path(env: Mapping[str, str], name: str) -> Path | None:
    value = env.get(name)
    return Path(value).expanduser().absolute() if value else None


def resolve(
    board: str | os.PathLike[str] | None = None,
    index: str | os.PathLike[str] | None = None,
    socket: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Locations:
    """Compute every location; touches nothing on disk."""
    env = os.environ if env is None else env
    home = _env_path(env, "MEMORYD_HOME")
    if home is not None:
        data, state, cache, logs = home / "data", home / "state", home / "cache", home / "logs"
    else:
        dirs = platformdirs.PlatformDirs(APP, appauthor=False)
        data = Path(dirs.user_data_dir)
        state = Path(dirs.user_state_dir)
        cache = Path(dirs.user_cache_dir)
        logs = Path(dirs.user_log_dir)
    board_dir = (
        Path(board).expanduser().absolute() if board else _env_path(env, "MEMORYD_BOARD") or data / "board"
    )
    return Locations(
        data=data,
        state=state,
        cache=cache,
        logs=logs,
        board=board_dir,
        index=Path(index).expanduser().absolute()
        if index
        else _env_path(env, "MEMORYD_INDEX") or default_index(board_dir, data, cache),
        models=_env_path(env, "MEMORYD_MODELS") or cache / "models",
        socket=Path(socket).expanduser().absolute() if socket else rendezvous.socket_path(env).absolute(),
        exports=data / "exports",
    )


def board_named(
    board: str | os.PathLike[str] | None = None,
    index: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> bool:
    """Whether the board a command works on was named (``--board``/``--index`` given, or
    ``MEMORYD_BOARD``/``MEMORYD_INDEX`` set): then a running daemon serves the command only when it serves
    that board. Left unnamed, the board is whichever the running daemon serves."""
    env = os.environ if env is None else env
    return bool(board or index or env.get("MEMORYD_BOARD") or env.get("MEMORYD_INDEX"))


def interpreter() -> str:
    """The absolute path of the running interpreter, symlinks kept: a virtualenv's ``bin/python`` is a
    symlink whose location is what makes the venv's packages importable."""
    return os.path.abspath(sys.executable)


def memoryd_command() -> str:
    """How a person at a shell runs this install's ``memoryd``, for the commands we print: ``memoryd`` when
    that name on ``PATH`` is this install's script, else the script's absolute path (shell-quoted), else
    ``<python> -m memoryd``. A printed fix must work when pasted as it is."""
    import shutil

    script = Path(interpreter()).parent / "memoryd"
    found = shutil.which("memoryd")
    with contextlib.suppress(OSError):
        if found and script.exists() and os.path.samefile(found, script):
            return "memoryd"
    if script.exists():
        return shlex.quote(str(script))
    return f"{shlex.quote(interpreter())} -m memoryd"
