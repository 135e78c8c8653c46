"""The board root and its top-level folders (``tasks``, ``briefs``, ``memories``, ``sessions``), opened
through the gate, the same way for every kind.

``open_board(root)`` -> the root as a :class:`~memoryd.board.gate.SafeDir`; :class:`BoardUnreadable` when it
is missing, not a directory or not readable (nothing can then be said about its contents).
``open_folder(root, name, create=False)`` -> one top-level folder, None when absent (made, mode 0700, with
``create``); the gate's :class:`~memoryd.board.gate.UnsafePath` when ``name`` is a symlink or a file.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from memoryd import errors
from memoryd.board.gate import SafeDir, open_root

#: Mode of the folders memoryd creates: the board is private to its user.
DIR_MODE = 0o700


class BoardUnreadable(errors.BoardUnreadable):
    """The board root is missing, not a directory, or not readable; nothing can be said about its contents."""


def open_board(board_root: Path) -> SafeDir:
    """The board root through the gate. Raises :class:`BoardUnreadable` saying why it cannot be used."""
    try:
        root = open_root(board_root)
    except FileNotFoundError:
        raise BoardUnreadable(f"board {board_root} does not exist") from None
    except NotADirectoryError:
        raise BoardUnreadable(f"board {board_root} is not a directory") from None
    except PermissionError:
        raise BoardUnreadable(f"board {board_root}: permission denied") from None
    except OSError as exc:
        raise BoardUnreadable(f"board {board_root}: {exc.strerror or exc}") from None
    if not os.access(board_root, os.R_OK | os.X_OK):
        root.close()
        raise BoardUnreadable(f"board {board_root}: permission denied")
    return root


def open_folder(board_root: Path, name: str, *, create: bool = False) -> SafeDir | None:
    """The top-level folder ``name`` through the gate; None when it is absent and not ``create``.

    Raises :class:`BoardUnreadable` (the root), UnsafePath (``name`` is a symlink or not a directory),
    OSError (it cannot be created)."""
    with open_board(board_root) as root:
        try:
            return root.child(name)
        except FileNotFoundError:
            if not create:
                return None
        with contextlib.suppress(FileExistsError):  # another writer made it first
            os.mkdir(name, DIR_MODE, dir_fd=root.fd)
        return root.child(name)
