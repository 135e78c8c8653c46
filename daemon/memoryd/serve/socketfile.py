"""The Unix socket on disk: a 0700 directory owned by the user, a 0600 socket, stale-socket replacement.

Security rules: the socket lives in a directory of mode 0700 owned by the daemon's user;
the socket itself is 0600. The peer-uid check on every connection is in :mod:`memoryd.serve.listener`.

Socket activation: under systemd (``LISTEN_FDS``/``LISTEN_PID``, sd_listen_fds(3)) or launchd
(``launch_activate_socket``, launch(3), the plist's ``Sockets`` entry ``Listeners``) the service manager
owns the listening socket and its file; :func:`activated` takes it over and the daemon neither binds nor
removes the file, so connections made while the daemon restarts wait in the backlog.

Stale-socket rule: a socket file left by ``kill -9`` is removed only while holding the lock
(:mod:`memoryd.serve.lock`) and only after ``connect()`` to it is refused. Anything at the path that is not a
socket (a regular file, a directory, a symlink) is never removed: we refuse to start instead.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import socket
import stat
import sys
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path

from memoryd.errors import AlreadyRunning, SocketPathError
from memoryd_shim import rendezvous

_BACKLOG = 128


def ensure_socket_dir(directory: Path, *, ours: bool) -> None:
    """Create ``directory`` (0700) or check an existing one is owned by us and closed to others.

    ``ours`` marks a directory memoryd owns by design (its state dir, ``/tmp/memoryd-<uid>``): an
    existing one with a looser mode is tightened to 0700. Any other directory with group/other access
    is refused rather than chmod-ed behind the user's back.

    Raises :class:`SocketPathError` with the fix in the message.
    """
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise SocketPathError(
            f"cannot create the socket directory {directory}: {exc.strerror or exc}"
        ) from exc
    st = directory.lstat()
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise SocketPathError(f"socket directory {directory} is not a real directory (a symlink or a file)")
    if st.st_uid != os.getuid():
        raise SocketPathError(
            f"socket directory {directory} is owned by uid {st.st_uid}, not by this user (uid {os.getuid()}). "
            f"{private_dir_fix(directory, st)}"
        )
    loose = stat.S_IMODE(st.st_mode) & 0o077
    if loose and ours:
        os.chmod(directory, 0o700)
    elif loose:
        raise SocketPathError(
            f"socket directory {directory} has mode {stat.S_IMODE(st.st_mode):04o}; other users could reach "
            f"the socket. {private_dir_fix(directory, st)}"
        )


#: A folder only the user can open, for a socket of their choosing (the default needs no --socket at all).
PRIVATE_DIR = "~/.memoryd"
#: The fix for a socket folder others can reach, in words (the serve error and ``memoryd doctor`` say it).
PRIVATE_DIR_ADVICE = (
    f"make a folder only you can open for it: `mkdir -m 700 {PRIVATE_DIR}` and use "
    f"`--socket {PRIVATE_DIR}/memoryd.sock` (or leave out --socket: the default socket is private)"
)


def private_dir_fix(directory: Path, st: os.stat_result) -> str:
    """What to do about a socket ``directory`` others can reach (``st``: its lstat), as a sentence.

    Never a chmod of a shared folder (sticky or writable by others, like ``/tmp``) or of one owned by
    someone else: that would change the folder for everyone using it. Suggested first: a new folder only
    the user can open; a chmod is offered only besides that, for a folder the user owns that no one else
    may write to, and only if memoryd alone uses it."""
    if shared_dir(st):
        return f"To fix: {PRIVATE_DIR_ADVICE}."
    return f"To fix: {PRIVATE_DIR_ADVICE}; or, if only memoryd uses {directory}, `chmod 700 {directory}`."


def shared_dir(st: os.stat_result) -> bool:
    """A folder others use too (``st``: its lstat): sticky, writable by group or others, or not the user's."""
    return bool(st.st_mode & (stat.S_ISVTX | stat.S_IWOTH | stat.S_IWGRP)) or st.st_uid != os.getuid()


def is_memoryd_dir(directory: Path) -> bool:
    """Whether ``directory`` is one memoryd owns by design (state dir, or the ``/tmp`` fallback)."""
    mine = {rendezvous.state_dir().absolute(), Path(rendezvous.fallback_dir_str())}
    return directory.absolute() in mine


def replace_stale(path: Path) -> bool:
    """Make ``path`` free for ``bind()``; call only while holding the socket lock.

    Returns ``True`` when a stale socket was removed. Raises :class:`AlreadyRunning` when something
    answers on it (a daemon that does not use our lock), :class:`SocketPathError` when the path holds
    something other than a socket or cannot be probed.
    """
    try:
        st = path.lstat()
    except FileNotFoundError:
        return False
    if not stat.S_ISSOCK(st.st_mode):
        kind = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a socket"
        raise SocketPathError(
            f"{path} exists and is {kind}; memoryd will not remove it. Move it away or pick --socket"
        )
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(os.fsencode(path))
    except ConnectionRefusedError:
        pass  # proven stale: a socket file with no listener behind it
    except OSError as exc:
        if exc.errno != errno.ECONNREFUSED:
            raise SocketPathError(f"cannot probe the existing socket {path}: {exc.strerror or exc}") from exc
    else:
        raise AlreadyRunning(f"another process is listening on {path}; refusing to take it over")
    finally:
        probe.close()
    # Race note: we hold the lock, so no cooperating daemon can bind here between the probe and the
    # unlink; re-check the inode so we never remove a file that replaced the one we probed.
    current = path.lstat()
    if (current.st_dev, current.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISSOCK(current.st_mode):
        raise SocketPathError(f"{path} changed while being checked; refusing to remove it")
    path.unlink()
    return True


@dataclass(eq=False)
class BoundSocket:
    """A listening socket and the identity of the file it created (to remove only our own on exit).

    ``activation`` is ``"systemd"`` or ``"launchd"`` when the service manager passed the socket in
    (:func:`activated`); that file belongs to the manager and is never removed by the daemon.
    """

    sock: socket.socket
    path: Path
    dev: int
    ino: int
    activation: str | None = None
    gone: bool = False  # our file was removed or replaced: never look at the path again

    def remove_file(self) -> bool:
        """Unlink the socket file if it is still the one we bound; ``True`` when removed. Once our file
        is gone, later calls do nothing: a daemon started meanwhile may have bound a socket that the
        kernel gave our freed inode number, and the identity check alone would take it for ours."""
        if self.activation is not None or self.gone:
            return False  # the service manager's socket stays for the next daemon
        try:
            st = self.path.lstat()
        except FileNotFoundError:
            self.gone = True
            return False
        if not stat.S_ISSOCK(st.st_mode) or (st.st_dev, st.st_ino) != (self.dev, self.ino):
            self.gone = True  # someone else's file now: not ours to remove
            return False
        self.gone = True
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True


def bind(path: Path) -> BoundSocket:
    """Bind and listen on ``path`` with mode 0600; call after :func:`replace_stale`, holding the lock.

    Raises :class:`SocketPathError` when the path is too long for ``sun_path`` or bind fails.
    """
    if len(os.fsencode(path)) > rendezvous.MAX_SOCKET_PATH_BYTES:
        raise SocketPathError(
            f"socket path is {len(os.fsencode(path))} bytes; the limit is {rendezvous.MAX_SOCKET_PATH_BYTES} "
            f"(sun_path). Choose a shorter --socket such as {rendezvous.fallback_socket_path(path)}"
        )
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(os.fsencode(path))
        # chmod before listen(): until listen() every connect() is refused, and the 0700 directory
        # keeps other users out of the window between bind and chmod.
        os.chmod(path, 0o600)
        sock.listen(_BACKLOG)
        sock.setblocking(False)
        st = path.lstat()
    except OSError as exc:
        sock.close()
        raise SocketPathError(f"cannot bind {path}: {exc.strerror or exc}") from exc
    return BoundSocket(sock=sock, path=path, dev=st.st_dev, ino=st.st_ino)


SD_LISTEN_FDS_START = 3  # sd_listen_fds(3): passed descriptors start at 3
LAUNCHD_SOCKET_NAME = "Listeners"  # the key under the plist's Sockets entry


def activated(env: MutableMapping[str, str] | None = None) -> BoundSocket | None:
    """The listening socket a service manager passed in, or ``None`` (bind as usual).

    systemd: ``LISTEN_PID`` equal to our pid and ``LISTEN_FDS`` >= 1 (the socket is fd 3; the variables
    are removed from ``env`` so children do not inherit them, as ``sd_listen_fds(1)`` does). launchd (macOS
    only): ``launch_activate_socket("Listeners")``. Raises :class:`SocketPathError` when the passed
    descriptor is not a listening Unix stream socket.
    """
    env = os.environ if env is None else env
    fds = _systemd_fds(env)
    via = "systemd"
    if fds is None and sys.platform == "darwin":
        fds, via = _launchd_fds(), "launchd"
    if not fds:
        return None
    for extra in fds[1:]:  # one socket is configured; close anything else rather than leak it
        with contextlib.suppress(OSError):
            os.close(extra)
    try:
        sock = socket.socket(fileno=fds[0])
    except OSError as exc:
        raise SocketPathError(f"{via} passed fd {fds[0]}, which is not a socket: {exc}") from exc
    try:
        listening = sock.getsockopt(socket.SOL_SOCKET, getattr(socket, "SO_ACCEPTCONN", 30))
    except OSError:
        listening = 1  # macOS before 10.x has no SO_ACCEPTCONN for AF_UNIX; trust launchd
    if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM or not listening:
        sock.close()
        raise SocketPathError(f"{via} passed a socket that is not a listening Unix stream socket")
    os.set_inheritable(sock.fileno(), False)
    sock.setblocking(False)
    name = sock.getsockname()
    path = Path(os.fsdecode(name) if isinstance(name, (str, bytes)) else "")
    try:
        st = path.lstat()
        dev, ino = st.st_dev, st.st_ino
    except OSError:
        dev = ino = -1
    return BoundSocket(sock=sock, path=path, dev=dev, ino=ino, activation=via)


def _systemd_fds(env: MutableMapping[str, str]) -> list[int] | None:
    pid, count = env.get("LISTEN_PID"), env.get("LISTEN_FDS")
    if pid is None or count is None:
        return None
    for name in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        env.pop(name, None)
    try:
        if int(pid) != os.getpid() or int(count) < 1:
            return None  # meant for another process (our parent); not ours to take
        return list(range(SD_LISTEN_FDS_START, SD_LISTEN_FDS_START + int(count)))
    except ValueError:
        return None


def _launchd_fds() -> list[int] | None:
    """``launch_activate_socket(LAUNCHD_SOCKET_NAME, &fds, &count)`` from libSystem, via ctypes (macOS).

    Returns ``None`` when the process was not started by launchd with that socket (ESRCH, ENOENT...).
    """
    import ctypes

    try:
        libsystem = ctypes.CDLL("/usr/lib/libSystem.B.dylib", use_errno=True)
        activate = libsystem.launch_activate_socket
    except (OSError, AttributeError):
        return None
    activate.restype = ctypes.c_int
    activate.argtypes = [
        ctypes.c_char_p,
        ctypes.POINTER(ctypes.POINTER(ctypes.c_int)),
        ctypes.POINTER(ctypes.c_size_t),
    ]
    fds = ctypes.POINTER(ctypes.c_int)()
    count = ctypes.c_size_t(0)
    if activate(LAUNCHD_SOCKET_NAME.encode(), ctypes.byref(fds), ctypes.byref(count)) != 0:
        return None
    try:
        return [fds[i] for i in range(count.value)]
    finally:
        libsystem.free.argtypes = [ctypes.c_void_p]
        libsystem.free(ctypes.cast(fds, ctypes.c_void_p))  # launch(3): the caller frees the array


def describe(path: Path) -> dict:
    """``{"path", "exists", "mode", "owner_uid", "owner"}`` of the socket file, for ``memoryd status``."""
    info: dict = {"path": str(path), "exists": False, "mode": None, "owner_uid": None, "owner": None}
    try:
        st = path.lstat()
    except OSError:
        return info
    info.update(exists=True, mode=f"{stat.S_IMODE(st.st_mode):04o}", owner_uid=st.st_uid)
    try:
        info["owner"] = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        info["owner"] = str(st.st_uid)
    return info
