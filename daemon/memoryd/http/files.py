"""The files beside the daemon's socket that let its owner, and only its owner, reach the HTTP listener.

All live in the socket's directory (0700, the daemon's user; :mod:`memoryd.serve.socketfile`) and are 0600:

* ``http.token``  the bearer token, ``secrets.token_urlsafe(32)`` (43 characters), created at first use by
  whoever needs it first (the daemon, ``memoryd connect --http``, ``memoryd open``) and kept across restarts,
  so configured clients keep working; replaced only by :func:`rotate_token`;
* ``http.json``   ``{"port": int, "pid": int}`` while a daemon serves HTTP (written once it listens,
  removed when it stops), so ``memoryd open`` and ``memoryd connect --http`` find the port it really got;
* ``http.open``   a one-time code for the browser hand-over, written by ``memoryd open`` and consumed by the
  daemon's ``/open`` within :data:`HANDOVER_TTL_S`: the URL handed to the browser (and to ``xdg-open``'s
  command line, which other local users can read in ``ps``) then never carries the long-lived token.

Standard library only: the CLI reads these without importing Starlette or the MCP SDK.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import stat
import time
from pathlib import Path

TOKEN_NAME = "http.token"
PORT_NAME = "http.json"
HANDOVER_NAME = "http.open"
HANDOVER_TTL_S = 120.0
DEFAULT_PORT = 7077


class HttpFileError(OSError):
    """A file here is not what it must be (not ours, not a regular file, unreadable); the message says which."""


def token_path(socket_dir: Path) -> Path:
    return socket_dir / TOKEN_NAME


def port_path(socket_dir: Path) -> Path:
    return socket_dir / PORT_NAME


def handover_path(socket_dir: Path) -> Path:
    return socket_dir / HANDOVER_NAME


def _create_exclusive(path: Path, data: bytes) -> bool:
    """Create ``path`` (0600) holding ``data`` unless it exists; ``True`` when created here. A reader never
    sees it half-written: the data goes to a private temp file first, which is then hard-linked into place."""
    tmp = _private_temp(path, data)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)


def _replace(path: Path, data: bytes) -> None:
    os.replace(_private_temp(path, data), path)


def _private_temp(path: Path, data: bytes) -> Path:
    """A new 0600 file beside ``path`` holding ``data``, fsynced; the caller moves or links it into place."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        view = memoryview(data)
        while view:  # a short write goes on
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    return tmp


def _read_private(path: Path) -> bytes:
    """The bytes of a 0600 regular file owned by us. Raises ``FileNotFoundError``, or :class:`HttpFileError`
    for a symlink, another owner or looser permissions (a file others could have read is not trusted)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        # O_NOFOLLOW on a symlink: ELOOP on Linux and macOS, EMLINK on FreeBSD
        if exc.errno in (errno.ELOOP, errno.EMLINK) and os.path.islink(path):
            raise HttpFileError(f"{path} is a symlink; remove it") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise HttpFileError(f"{path} is not a regular file owned by this user; remove it")
        if stat.S_IMODE(st.st_mode) & 0o077:
            raise HttpFileError(
                f"{path} is readable by others (mode {stat.S_IMODE(st.st_mode):o}); remove it"
            )
        return os.read(fd, 1 << 16)
    finally:
        os.close(fd)


def ensure_token(socket_dir: Path) -> str:
    """The bearer token, created (0600) when there is none yet. Raises :class:`HttpFileError` or ``OSError``."""
    path = token_path(socket_dir)
    for _ in range(3):
        try:
            token = _read_private(path).decode("ascii").strip()
        except FileNotFoundError:
            _create_exclusive(path, secrets.token_urlsafe(32).encode("ascii"))
            continue
        except UnicodeDecodeError:
            raise HttpFileError(f"{path} does not hold a token; remove it") from None
        if len(token) < 32:
            raise HttpFileError(f"{path} holds no usable token ({len(token)} characters); remove it")
        return token
    raise HttpFileError(f"cannot create {path}")


def rotate_token(socket_dir: Path) -> str:
    """Replace the token with a new one (every configured client and browser cookie stops working)."""
    token = secrets.token_urlsafe(32)
    _replace(token_path(socket_dir), token.encode("ascii"))
    return token


def write_port(socket_dir: Path, port: int) -> None:
    """Record the port this process serves HTTP on (``{"port", "pid"}``, 0600)."""
    _replace(port_path(socket_dir), json.dumps({"port": port, "pid": os.getpid()}).encode())


def read_port(socket_dir: Path) -> dict | None:
    """``{"port": int, "pid": int}`` of the daemon serving HTTP, or ``None`` when none is (no file, or its
    process is gone). Raises :class:`HttpFileError` for a file that is not ours."""
    try:
        record = json.loads(_read_private(port_path(socket_dir)))
    except FileNotFoundError:
        return None
    except ValueError:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("port"), int):
        return None
    pid = record.get("pid")
    if isinstance(pid, int) and pid > 0:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
    return record


def remove_port(socket_dir: Path) -> None:
    """Remove the port file if this process wrote it."""
    path = port_path(socket_dir)
    with contextlib.suppress(OSError, ValueError):
        if json.loads(_read_private(path)).get("pid") == os.getpid():
            path.unlink()


def new_handover(socket_dir: Path) -> str:
    """A fresh one-time code for ``/open`` (replacing any unused one), valid for :data:`HANDOVER_TTL_S`."""
    code = secrets.token_urlsafe(32)
    _replace(handover_path(socket_dir), code.encode("ascii"))
    return code


def take_handover(socket_dir: Path, offered: str) -> bool:
    """Whether ``offered`` is the pending one-time code (compared in constant time); a match removes it, so
    it works once. An expired code (older than :data:`HANDOVER_TTL_S`) is removed and matches nothing; a
    wrong guess leaves a valid code in place (another local user probing ``/open`` cannot spoil it)."""
    path = handover_path(socket_dir)
    try:
        pending = _read_private(path).decode("ascii", "replace").strip()
        age = time.time() - path.stat().st_mtime
    except OSError:
        return False
    expired = age > HANDOVER_TTL_S
    matched = bool(pending) and secrets.compare_digest(pending.encode(), offered.encode("utf-8", "replace"))
    if matched or expired:
        with contextlib.suppress(OSError):
            path.unlink()
    return matched and not expired
