"""The one gate for every board file memoryd reads or hands back, and the ids that may become path components.

Over 400 lines because the file checks and the id checks are one rule (what may reach the file system)
and read best together.

A coding agent can write inside the board, so the board is untrusted. A file passes the gate only when

* every component between the board root and the file is a real directory (never a symlink): each one is
  opened with ``O_NOFOLLOW | O_DIRECTORY`` relative to its parent's descriptor, starting from the board
  root (the root itself may be a symlink, e.g. macOS ``/tmp``). This is a stronger form of "its real path
  lies inside the board's real path": nothing below the root can point anywhere else;
* ``lstat`` says a regular file: not a symlink, FIFO, socket, device or directory;
* its link count is 1 (a hard link is the same file as one outside the board);
* it is opened with ``O_NOFOLLOW | O_NONBLOCK`` (a FIFO swapped in can never block the daemon) and
  ``fstat`` after the open shows the same regular file as the ``lstat`` (no swap between check and open);
* it is at most ``max_bytes`` long.

Anything else raises :class:`UnsafePath` with a short reason, and nothing is read. A file that is simply
absent raises :class:`FileNotFoundError` (callers treat optional files that way).

Every kind opens the board the same way: :func:`open_board` (the root; :class:`BoardUnreadable` when it is
missing, not a directory or not readable) and :func:`open_folder` (one top-level folder, made on demand).

Task and brief ids (contract §3) are the only strings that may become path components. Every id that
arrives from a tool argument, a file name or a JSON field goes through :func:`check_task_id` /
:func:`check_brief_id` before it touches the file system. The check is a strict ASCII full match, so
``../x``, absolute paths, backslashes, ``%2e%2e``, NUL bytes, over-long strings and Unicode look-alikes
(fullwidth digits, Cyrillic letters) are all refused.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from memoryd import errors
from memoryd.errors import InvalidParams, ToolFailed

DEFAULT_MAX_BYTES = 8 * 2**20

# O_NONBLOCK on directories too: a FIFO planted where a folder belongs must fail (ENOTDIR), never wait.
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)


class UnsafePath(ToolFailed):
    """A path the gate refuses; ``reason`` says why (``"symlink"``, ``"fifo"``, ``"hard link"``, ...)."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(f"{os.fspath(path)}: {reason}")
        self.path = os.fspath(path)
        self.reason = reason


class BrokenFile(UnsafePath):
    """A file that passed the gate but whose content is unusable (invalid UTF-8)."""


#: Names no board folder holds as a record: vim's "can I write here" probe, Finder's folder settings.
_IGNORED_NAMES = frozenset({"4913", ".DS_Store"})
#: Suffixes of editors' backup, swap and partial files, and of our own writer's temp files.
_IGNORED_SUFFIXES = ("~", ".swp", ".swx", ".tmp", ".bak", ".part")


def is_ignored_name(name: str) -> bool:
    """True for editor temp/backup/swap names and dotfiles (``.#said.txt``, ``said.txt~``, ``4913``, ...):
    never a board file, so never read, watched or reported as skipped, whatever the folder.

    Dotfiles as a whole are ignored because the board reader never reads them either; our own writer's
    temp files are dotfiles (``.outcome.md.<hex>.tmp``).
    """
    return (
        name in _IGNORED_NAMES
        or name.startswith(".")
        or name.endswith(_IGNORED_SUFFIXES)
        or (name.startswith("#") and name.endswith("#"))  # Emacs auto-save
    )


@dataclass
class Skipped:
    """A board file (board-relative POSIX path) that was not loaded, and why (every kind reports these)."""

    path: str
    reason: str


def kind_of(st: os.stat_result) -> str:
    """A short name for the file type in an ``lstat`` result, as used in refusal reasons."""
    mode = st.st_mode
    for test, name in (
        (stat.S_ISREG, "regular file"),
        (stat.S_ISDIR, "directory"),
        (stat.S_ISLNK, "symlink"),
        (stat.S_ISFIFO, "fifo"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
    ):
        if test(mode):
            return name
    return "unknown file type"


def file_signature(path: str | os.PathLike[str]) -> tuple[int, ...] | None:
    """What tells one state of a regular file from another: ``(device, inode, size, mtime ns, ctime ns)``;
    None when ``path`` is gone or no regular file (a folder's own times miss edits inside it). Any write,
    rename over it or ``chmod`` changes the ctime, so an equal signature is the file as it was."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def refusal(st: os.stat_result, max_bytes: int | None = None) -> str | None:
    """Why ``st`` (an lstat/fstat result) is not a readable board file, or None when it is."""
    if not stat.S_ISREG(st.st_mode):
        return kind_of(st)
    if st.st_nlink != 1:
        return f"hard link ({st.st_nlink} links)"
    if max_bytes is not None and st.st_size > max_bytes:
        return f"too large ({st.st_size} bytes > {max_bytes})"
    return None


def _check_name(rel: str, name: str) -> None:
    # One path component, nothing that could climb or hide: names come from listings or fixed file names,
    # but a caller bug must not become a traversal.
    if not name or name in (".", "..") or "/" in name or "\x00" in name:
        raise UnsafePath(f"{rel}/{name!r}", "not a single path component")


def _relative_parts(board_root: Path, path: str | os.PathLike[str]) -> tuple[str, ...]:
    """``path`` (relative to the board, or absolute under it) as components; refuses anything climbing out."""
    p = Path(path)
    if p.is_absolute():
        root = Path(os.path.abspath(board_root))
        for base in (root, Path(os.path.realpath(root))):
            if p.is_relative_to(base):
                p = p.relative_to(base)
                break
        else:
            raise UnsafePath(p, "outside the board")
    for part in p.parts:
        if part in ("", ".", "..") or "\x00" in part:
            raise UnsafePath(p, "not a plain path inside the board")
    return p.parts


class SafeDir:
    """An open directory inside the board, reached without following any symlink below the root.

    Use as a context manager; every read goes through the gate relative to this directory's descriptor,
    so a component swapped for a symlink after the check cannot redirect the read.
    """

    def __init__(self, fd: int, board_root: Path, rel: str) -> None:
        self.fd = fd
        self.board_root = board_root
        self.rel = rel  # board-relative, for messages and Skipped records ("" for the root)

    def __enter__(self) -> SafeDir:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def relpath(self, name: str) -> str:
        """Board-relative path of ``name`` in this directory (POSIX separators)."""
        return f"{self.rel}/{name}" if self.rel else name

    def names(self) -> list[str]:
        """Entry names, sorted; nothing is followed or opened."""
        return sorted(os.listdir(self.fd))

    def lstat(self, name: str) -> os.stat_result:
        """``lstat`` of an entry (raises FileNotFoundError when absent)."""
        _check_name(self.rel, name)
        return os.stat(name, dir_fd=self.fd, follow_symlinks=False)

    def exists(self, name: str) -> bool:
        """True when an entry ``name`` is here (a dangling symlink counts: it is never followed)."""
        try:
            self.lstat(name)
        except FileNotFoundError:
            return False
        return True

    def unlink(self, name: str) -> None:
        """Remove entry ``name`` here (a symlink itself, never its target); FileNotFoundError when absent."""
        _check_name(self.rel, name)
        os.unlink(name, dir_fd=self.fd)

    def is_safe_file(self, name: str) -> bool:
        """True when ``name`` exists here and is a regular file with one link (never raises for I/O)."""
        try:
            return refusal(self.lstat(name)) is None
        except (OSError, UnsafePath):
            return False

    def child(self, name: str) -> SafeDir:
        """Open subdirectory ``name``; UnsafePath when it is a symlink or not a directory."""
        _check_name(self.rel, name)
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=self.fd)
        except FileNotFoundError:
            raise
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                raise UnsafePath(self.relpath(name), self._kind(name, "not a directory")) from None
            raise UnsafePath(self.relpath(name), f"cannot open directory: {exc.strerror}") from None
        return SafeDir(fd, self.board_root, self.relpath(name))

    def _kind(self, name: str, default: str) -> str:
        try:
            return kind_of(os.stat(name, dir_fd=self.fd, follow_symlinks=False))
        except OSError:
            return default

    def read_bytes(self, name: str, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
        """The bytes of regular file ``name`` here, through every check of the gate (module docstring)."""
        where = self.relpath(name)
        before = self.lstat(name)  # FileNotFoundError passes through: absent is not unsafe
        why = refusal(before, max_bytes)
        if why:
            raise UnsafePath(where, why)
        try:
            fd = os.open(name, _FILE_FLAGS, dir_fd=self.fd)
        except FileNotFoundError:
            raise
        except OSError as exc:
            reason = "symlink" if exc.errno == errno.ELOOP else f"cannot open: {exc.strerror}"
            raise UnsafePath(where, reason) from None
        try:
            after = os.fstat(fd)
            why = refusal(after, max_bytes)
            if why:
                raise UnsafePath(where, why)
            if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
                raise UnsafePath(where, "replaced between check and open")
            return _read_all(fd, where, max_bytes)
        finally:
            os.close(fd)

    def read_text(self, name: str, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
        """``read_bytes`` decoded as strict UTF-8 (a leading BOM is dropped); BrokenFile when invalid."""
        return decode_utf8(self.read_bytes(name, max_bytes), self.relpath(name))


def _read_all(fd: int, where: str, max_bytes: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        try:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
        except BlockingIOError:  # only a non-regular file could do this; fstat already refused those
            raise UnsafePath(where, "would block") from None
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:  # grew after the size check
            raise UnsafePath(where, f"too large (> {max_bytes} bytes)")


def decode_utf8(data: bytes, where: str | os.PathLike[str]) -> str:
    """Strict UTF-8 (BOM dropped); raises :class:`BrokenFile` naming the first bad byte offset."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BrokenFile(where, f"invalid UTF-8 at byte {exc.start}") from None
    return text[1:] if text.startswith("\ufeff") else text


def open_root(board_root: Path) -> SafeDir:
    """Open the board root itself (following a symlinked root is allowed: the user chose it).

    Raises OSError (FileNotFoundError, NotADirectoryError, PermissionError) for an unusable root.
    """
    fd = os.open(os.path.abspath(board_root), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    return SafeDir(fd, Path(board_root), "")


#: Mode of the folders memoryd creates: the board is private to its user.
DIR_MODE = 0o700


class BoardUnreadable(errors.BoardUnreadable):
    """The board root is missing, not a directory, or not readable; nothing can be said about its contents."""


def os_reason(exc: OSError, what: str) -> str:
    """Why ``what`` (``"board /x"``, a path) cannot be used, as a person reads it: ``<what> does not
    exist``, ``<what> is not a directory``, ``<what> is a directory``, ``<what>: permission denied``, else
    ``<what>: <the system's words>``."""
    if isinstance(exc, FileNotFoundError):
        return f"{what} does not exist"
    if isinstance(exc, NotADirectoryError):
        return f"{what} is not a directory"
    if isinstance(exc, IsADirectoryError):
        return f"{what} is a directory"
    if isinstance(exc, PermissionError):
        return f"{what}: permission denied"
    return f"{what}: {exc.strerror or exc}"


def open_board(board_root: Path) -> SafeDir:
    """The board root through the gate. Raises :class:`BoardUnreadable` saying why it cannot be used."""
    try:
        root = open_root(board_root)
    except OSError as exc:
        raise BoardUnreadable(os_reason(exc, f"board {board_root}")) from None
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


def open_dir(board_root: Path, path: str | os.PathLike[str] = ".") -> SafeDir:
    """Open board directory ``path`` (relative to the root, or absolute under it) through the gate.

    Raises UnsafePath (a symlinked or non-directory component, a path outside the board),
    FileNotFoundError (a component is absent) or OSError for the root itself.
    """
    parts = _relative_parts(board_root, path)
    current = open_root(board_root)
    try:
        for part in parts:
            nxt = current.child(part)
            current.close()
            current = nxt
    except BaseException:
        current.close()
        raise
    return current


def _split(board_root: Path, path: str | os.PathLike[str]) -> tuple[tuple[str, ...], str]:
    parts = _relative_parts(board_root, path)
    if not parts:
        raise UnsafePath(path, "the board root is not a file")
    return parts[:-1], parts[-1]


def safe_read_bytes(board_root: Path, path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """Read a board file through the gate.

    ``path`` is relative to ``board_root`` or absolute under it. Raises :class:`UnsafePath` with a reason
    (symlink, fifo, socket, device, hard link, outside the board, too large, swapped) and
    FileNotFoundError when the file or a parent is absent.
    """
    parents, name = _split(board_root, path)
    with open_dir(board_root, Path(*parents) if parents else ".") as d:
        return d.read_bytes(name, max_bytes)


def safe_read_text(board_root: Path, path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """:func:`safe_read_bytes` decoded as strict UTF-8; invalid UTF-8 raises :class:`BrokenFile`."""
    return decode_utf8(safe_read_bytes(board_root, path, max_bytes), path)


def is_safe_file(board_root: Path, path: Path) -> bool:
    """True when ``path`` exists and would pass the gate (regular, one link, no symlink on the way).

    Never raises; it does not open the file, so a later read still goes through the full gate.
    """
    try:
        parents, name = _split(board_root, path)
        with open_dir(board_root, Path(*parents) if parents else ".") as d:
            return d.is_safe_file(name)
    except (OSError, UnsafePath, ValueError):
        return False


def list_dir(board_root: Path, path: Path) -> list[os.DirEntry[str]]:
    """Entries of board directory ``path``, sorted by name, without following symlinks.

    The directory and every parent below the root are checked to be real directories (a symlinked
    directory is refused with UnsafePath, so it is never walked). Entries are returned as-is, symlinks
    included: use ``entry.is_dir(follow_symlinks=False)`` and read files through the gate, which re-checks
    each one, since a listing is only names.
    """
    with open_dir(board_root, path) as d:
        identity = os.fstat(d.fd)
        target = os.path.join(os.path.abspath(board_root), *_relative_parts(board_root, path))
        with os.scandir(target) as it:
            entries = list(it)
        # The path string was resolved again by scandir: make sure it named the directory we checked.
        now = os.stat(target, follow_symlinks=False)
        if (now.st_dev, now.st_ino) != (identity.st_dev, identity.st_ino):
            raise UnsafePath(target, "replaced while listing")
    return sorted(entries, key=lambda e: e.name)


# -- ids: the only strings that may become path components -------------------------------------------

TASK_ID_PATTERN = r"t-\d{8}-[0-9a-f]{6}"
BRIEF_ID_PATTERN = r"b-\d{8}-[0-9a-f]{6}"

# re.ASCII: without it \d also matches fullwidth and other Unicode digits ("b-２０２６...").
_TASK_RE = re.compile(TASK_ID_PATTERN, re.ASCII)
_BRIEF_RE = re.compile(BRIEF_ID_PATTERN, re.ASCII)
_ID_LENGTH = 17  # "b-" + 8 digits + "-" + 6 hex; longer strings are refused before any regex work


class InvalidId(InvalidParams, ValueError):
    """An id that does not match its contract pattern; the message names the expected pattern."""


def _check(value: object, regex: re.Pattern[str], what: str, shape: str) -> str:
    if isinstance(value, str) and len(value) == _ID_LENGTH and regex.fullmatch(value):
        return value
    shown = repr(value) if not isinstance(value, str) or len(value) <= 40 else repr(value[:40]) + "..."
    raise InvalidId(f"invalid {what} id {shown}: expected {shape} (pattern {regex.pattern})")


def check_task_id(value: object) -> str:
    """Return ``value`` if it is a task id ``t-<yyyymmdd>-<6 lowercase hex>``; else raise :class:`InvalidId`."""
    return _check(value, _TASK_RE, "task", "t-<yyyymmdd>-<6 lowercase hex>")


def check_brief_id(value: object) -> str:
    """Return ``value`` if it is a brief id ``b-<yyyymmdd>-<6 lowercase hex>``; else raise :class:`InvalidId`."""
    return _check(value, _BRIEF_RE, "brief", "b-<yyyymmdd>-<6 lowercase hex>")


def is_task_id(value: object) -> bool:
    """True when ``value`` is a well-formed task id (never raises)."""
    return isinstance(value, str) and len(value) == _ID_LENGTH and _TASK_RE.fullmatch(value) is not None


def is_brief_id(value: object) -> bool:
    """True when ``value`` is a well-formed brief id (never raises)."""
    return isinstance(value, str) and len(value) == _ID_LENGTH and _BRIEF_RE.fullmatch(value) is not None
