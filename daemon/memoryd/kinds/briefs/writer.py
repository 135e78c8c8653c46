"""The write side of the board: ``outcome.md`` through the same gate, and creating an empty board.

``save_outcome`` writes only into a real directory directly under a real ``briefs/`` (each component
opened with ``O_NOFOLLOW | O_DIRECTORY`` from the board root's descriptor), through a temp file in that
same folder, fsync, and a rename over ``outcome.md``. A rename replaces a symlinked ``outcome.md`` itself
instead of writing through it.
"""

from __future__ import annotations

import os
from pathlib import Path

from memoryd.board import atomic
from memoryd.board.gate import DIR_MODE, SafeDir, check_brief_id, open_folder
from memoryd.errors import NotFound
from memoryd.kinds.briefs.files import Outcome, render_outcome
from memoryd.kinds.briefs.reader import BRIEFS_DIR, TASKS_DIR
from memoryd.kinds.briefs.source import BoardUnreadable
from memoryd.logs import get_logger

log = get_logger("memoryd.board")

OUTCOME_FILE = "outcome.md"


class BriefNotFound(NotFound, LookupError):
    """No brief folder (with a ``brief.json``) for that id on the board."""


def brief_dir(board_root: Path, brief_id: str) -> SafeDir:
    """The brief's folder, opened through the gate. Raises BriefNotFound (no folder or no ``brief.json``),
    UnsafePath, BoardUnreadable."""
    briefs = open_folder(board_root, BRIEFS_DIR)
    if briefs is None:
        raise BriefNotFound(brief_id)
    with briefs:
        try:
            d = briefs.child(brief_id)
        except FileNotFoundError:
            raise BriefNotFound(brief_id) from None
    try:
        d.lstat("brief.json")
    except FileNotFoundError:
        d.close()
        raise BriefNotFound(brief_id) from None
    except BaseException:
        d.close()
        raise
    return d


def save_outcome(board_root: Path, brief_id: str, outcome: Outcome) -> Path:
    """Write ``briefs/<brief_id>/outcome.md`` (contract §3 shape, via :func:`render_outcome`); return its path.

    Each call replaces the previous outcome. Raises, before writing anything: InvalidId (checked before any
    file system call), BriefNotFound (no such brief folder or no ``brief.json`` in it), UnsafePath
    (``briefs/`` or the brief folder is a symlink or not a directory; ``outcome.md`` is a directory),
    BoardUnreadable (the board root itself). OSError for a failed write (disk full); no temp file is left.
    """
    check_brief_id(brief_id)
    data = render_outcome(outcome).encode("utf-8")
    with brief_dir(board_root, brief_id) as d:
        # rename(2) replaces the directory entry: a symlink named outcome.md is replaced, never followed.
        atomic.write_replace(d, OUTCOME_FILE, data)
        path = Path(board_root) / d.rel / OUTCOME_FILE
    log.info("board.outcome_saved", brief=brief_id, bytes=len(data))
    return path


def ensure_board(root: Path) -> None:
    """Create an empty board (``root``, ``tasks/``, ``briefs/``, each mode 0700) where missing.

    Existing folders are left as they are (their mode included). Raises BoardUnreadable when ``root`` or
    one of the two folders exists but is not a directory, or cannot be created.
    """
    root = Path(root)
    try:
        root.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    except FileExistsError:
        raise BoardUnreadable(f"board {root} is not a directory") from None
    except OSError as exc:
        raise BoardUnreadable(f"board {root}: {exc.strerror}") from None
    for sub in (TASKS_DIR, BRIEFS_DIR):
        path = root / sub
        try:
            os.mkdir(path, DIR_MODE)
        except FileExistsError:
            if not path.is_dir() or path.is_symlink():
                raise BoardUnreadable(f"board {root}: {sub} is not a directory") from None
        except OSError as exc:
            raise BoardUnreadable(f"board {root}: cannot create {sub}: {exc.strerror}") from None
