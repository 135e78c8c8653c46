"""Writing another application's config file safely (issue 8, "because these files belong to other apps").

* Symlinks are followed to the real file (dotfile setups), and the write replaces that file.
* A one-time backup ``<file>.memoryd-backup`` (beside the path the agent uses, mode 0600) keeps the bytes
  from before memoryd's first change (empty when memoryd created the file); it is never overwritten.
* The new bytes go to a temp file beside the target, are fsync-ed and renamed over it; the target's mode
  is kept. A file that changed since it was read is not overwritten (:class:`ChangedMeanwhile`).
* The file is read back and checked with ``verify``; when the check fails the old bytes are put back
  the same way and :class:`VerifyFailed` is raised, so a change only counts once it reads back.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

BACKUP_SUFFIX = ".memoryd-backup"


class WriteError(OSError):
    """The config file could not be written; nothing was changed (the message says why)."""


class ChangedMeanwhile(WriteError):
    """The file changed between reading it and writing it (the agent itself may be writing it)."""


class VerifyFailed(WriteError):
    """The written file did not read back as expected; the old content was restored."""


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + BACKUP_SUFFIX)


def target_of(path: Path) -> Path:
    """The real file behind ``path`` (symlinks followed); raises :class:`WriteError` for a dangling link."""
    if path.is_symlink() and not path.exists():
        raise WriteError(f"{path} is a symlink to a missing file ({os.readlink(path)}); not touched")
    return Path(os.path.realpath(path))


def read_bytes(path: Path) -> bytes | None:
    """The file's bytes through any symlink, or ``None`` when it does not exist."""
    try:
        return target_of(path).read_bytes()
    except FileNotFoundError:
        return None


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _replace(target: Path, data: bytes, mode: int) -> None:
    tmp = target.with_name(f".{target.name}.memoryd-{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(target.parent)


def _make_backup(path: Path, data: bytes) -> bool:
    backup = backup_path(path)
    try:
        fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return False
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def write(path: Path, new: bytes, old: bytes | None, verify: Callable[[bytes], bool]) -> bool:
    """Replace the file at ``path`` (whose content was ``old``; ``None`` = it did not exist) with ``new``.

    Returns whether a backup was made now. Raises :class:`ChangedMeanwhile`, :class:`VerifyFailed` or
    :class:`WriteError` (with the OS reason); in every case the file holds ``old`` afterwards.
    """
    try:
        target = target_of(path)
        current = read_bytes(path)
        if current != old:
            raise ChangedMeanwhile(f"{path} changed while memoryd was editing it; run the command again")
        if old is None:
            target.parent.mkdir(parents=True, exist_ok=True)
            mode = 0o600  # agent configs can hold API keys in their env blocks
        else:
            mode = stat.S_IMODE(target.stat().st_mode)
        # An empty backup records "memoryd created this file" (so disconnect prunes what it added).
        made_backup = _make_backup(path, old or b"")
        _replace(target, new, mode)
    except WriteError:
        raise
    except OSError as exc:
        raise WriteError(f"cannot write {path}: {exc.strerror or exc}") from exc
    try:
        ok = verify(target.read_bytes())
    except (OSError, ValueError):
        ok = False
    if not ok:
        try:
            if old is None:
                target.unlink(missing_ok=True)
            else:
                _replace(target, old, mode)
        except OSError as exc:
            raise VerifyFailed(
                f"{path} did not read back as written and restoring it failed ({exc}); "
                f"the original is in {backup_path(path)}"
            ) from exc
        raise VerifyFailed(f"{path} did not read back as written; the original content was put back")
    return made_backup
