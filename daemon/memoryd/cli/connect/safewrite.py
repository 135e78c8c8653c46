"""Writing another application's config file safely.

* Symlinks are followed to the real file (dotfile setups), and the write replaces that file.
* A one-time backup ``<file>.memoryd-backup`` (beside the path the agent uses, mode 0600) keeps the bytes
  from before memoryd's first change; it is never overwritten. A file memoryd creates gets
  ``<file>.memoryd-created`` instead, naming the folders it created for it (JSON ``{"dirs": [...]}``).
* After a removal (:func:`after_removal`): a file memoryd created that holds nothing else is deleted with
  its marker and the (empty) folders memoryd created; a backup goes once the file is back to its bytes, and
  stays (said so) when the file changed since connect: then it is the only copy of the file before memoryd.
* The new bytes go to a temp file ``.<file>.memoryd-<pid>.tmp`` beside the target, are fsync-ed and
  renamed over it; the target's mode is kept. Temps left by a killed ``connect`` (their pid is not
  running) are removed by the next write of that file. A file that changed since it was read is not
  overwritten (:class:`ChangedMeanwhile`).
* The file is read back and checked with ``verify``; when the check fails the old bytes are put back
  the same way and :class:`VerifyFailed` is raised, so a change only counts once it reads back.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

from memoryd.board.atomic import pid_alive, write_all

BACKUP_SUFFIX = ".memoryd-backup"
CREATED_SUFFIX = ".memoryd-created"


class WriteError(OSError):
    """The config file could not be written; nothing was changed (the message says why)."""


class ChangedMeanwhile(WriteError):
    """The file changed between reading it and writing it (the agent itself may be writing it)."""


class VerifyFailed(WriteError):
    """The written file did not read back as expected; the old content was restored."""


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + BACKUP_SUFFIX)


def created_path(path: Path) -> Path:
    """The marker saying memoryd created ``path`` (and which folders it created for it)."""
    return path.with_name(path.name + CREATED_SUFFIX)


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


def _temp_of(target: Path, pid: int) -> Path:
    return target.with_name(f".{target.name}.memoryd-{pid}.tmp")


def _clear_stale_temps(target: Path) -> None:
    """Remove ``.<target>.memoryd-<pid>.tmp`` files whose writer is gone (a killed ``connect``)."""
    prefix, suffix = f".{target.name}.memoryd-", ".tmp"
    with contextlib.suppress(OSError), os.scandir(target.parent) as entries:
        for entry in entries:
            middle = entry.name[len(prefix) : -len(suffix)]
            if not (entry.name.startswith(prefix) and entry.name.endswith(suffix) and middle.isdigit()):
                continue
            pid = int(middle)
            if (pid == os.getpid() or not pid_alive(pid)) and entry.is_file(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def _replace(target: Path, data: bytes, mode: int) -> None:
    _clear_stale_temps(target)
    tmp = _temp_of(target, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        try:
            os.fchmod(fd, mode)
            write_all(fd, data)
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
        write_all(fd, data)
    finally:
        os.close(fd)
    return True


def _missing_dirs(directory: Path) -> list[Path]:
    """``directory`` and those of its parents that do not exist, outermost first."""
    missing: list[Path] = []
    while not os.path.lexists(directory) and directory != directory.parent:
        missing.append(directory)
        directory = directory.parent
    return missing[::-1]


def _created_dirs(marker: Path) -> list[str]:
    try:
        dirs = json.loads(marker.read_text(encoding="utf-8")).get("dirs", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [d for d in dirs if isinstance(d, str) and os.path.isabs(d)] if isinstance(dirs, list) else []


def _mark_created(path: Path, dirs: list[Path]) -> None:
    marker = created_path(path)
    known = _created_dirs(marker)  # a marker left from before (the file was deleted by hand since)
    known += [str(d) for d in dirs if str(d) not in known]
    _replace(marker, json.dumps({"dirs": known}).encode() + b"\n", 0o600)


def write(path: Path, new: bytes, old: bytes | None, verify: Callable[[bytes], bool]) -> bool:
    """Replace the file at ``path`` (whose content was ``old``; ``None`` = it did not exist) with ``new``.

    Returns whether a backup was made now (never for a file created now: its marker is written instead).
    Raises :class:`ChangedMeanwhile`, :class:`VerifyFailed` or :class:`WriteError` (with the OS reason);
    in every case the file holds ``old`` afterwards.
    """
    try:
        target = target_of(path)
        current = read_bytes(path)
        if current != old:
            raise ChangedMeanwhile(f"{path} changed while memoryd was editing it; run the command again")
        if old is None:
            dirs = _missing_dirs(target.parent)
            target.parent.mkdir(parents=True, exist_ok=True)
            _mark_created(path, dirs)
            mode = 0o600  # agent configs can hold API keys in their env blocks
            made_backup = False
        else:
            mode = stat.S_IMODE(target.stat().st_mode)
            # a file memoryd created has no "before" to keep: its marker says so
            made_backup = not os.path.lexists(created_path(path)) and _make_backup(path, old)
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
                after_removal(path, True)
            else:
                _replace(target, old, mode)
        except OSError as exc:
            raise VerifyFailed(
                f"{path} did not read back as written and restoring it failed ({exc}); "
                f"the original is in {backup_path(path)}"
            ) from exc
        raise VerifyFailed(f"{path} did not read back as written; the original content was put back")
    return made_backup


def _hand_over(directory: Path, dirs: list[str]) -> None:
    """The folders memoryd created and could not remove yet, because another file memoryd created is still
    in ``directory``: that file's marker takes them over, so its removal removes them."""
    for other in sorted(directory.glob("*" + CREATED_SUFFIX)):
        known = _created_dirs(other)
        _replace(
            other, json.dumps({"dirs": dirs + [d for d in known if d not in dirs]}).encode() + b"\n", 0o600
        )
        return


def after_removal(path: Path, empty: bool, ours_left: bool = False) -> str | None:
    """Tidy up after memoryd's entry left ``path`` (``empty``: nothing else is in it now).

    A file memoryd created (its marker exists) that is empty is deleted, with the marker and the folders
    memoryd created for it (innermost first, each only while empty); one that holds other content stays and
    is the user's (the marker goes), unless ``ours_left``: another memoryd entry is still in it. A backup goes when the file is byte for byte what it holds. Returns
    what was done, for people (``None``: nothing). Never raises: a leftover is better than a failed
    disconnect.
    """
    marker, backup = created_path(path), backup_path(path)
    try:
        if os.path.lexists(marker):
            dirs = _created_dirs(marker)
            if path.is_symlink():
                marker.unlink()
                return None
            if not empty:
                # Another memoryd entry is still in it (the capture hooks beside the Stop hook): the marker
                # stays, so the removal that empties it deletes the file instead of backing it up. Content
                # that is not ours makes the file the user's: only the marker goes.
                if not ours_left:
                    marker.unlink()
                return None
            path.unlink(missing_ok=True)
            backup.unlink(missing_ok=True)
            marker.unlink()
            for i in reversed(range(len(dirs))):
                try:
                    os.rmdir(dirs[i])  # only an empty folder; a symlink or a file is refused
                except OSError:
                    _hand_over(Path(dirs[i]), dirs[: i + 1])
                    break
            return "memoryd had created this file: deleted"
        if os.path.lexists(backup):
            if read_bytes(path) == backup.read_bytes():
                backup.unlink()
                return "back to its original bytes: backup deleted"
            # Changed since connect (by the agent or by hand): the file keeps those changes, and the backup,
            # the only copy of the file from before memoryd, stays for the person to compare or delete.
            return (
                f"changed since connect: {backup.name}, the file before memoryd, is kept; delete it when done"
            )
    except OSError:
        return None
    return None
