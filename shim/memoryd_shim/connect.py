"""One connect episode: try the socket with backoff, start the daemon once if allowed, give up at a deadline.

A :class:`Connector` never blocks for long (one ``connect`` on a Unix socket returns at once); the relay's
loop calls :meth:`Connector.poll` when :attr:`Connector.next_at` comes, so stdin, signals and the parent
check keep working while a daemon starts.
"""

from __future__ import annotations

import _socket  # the C module itself: ``socket`` imports enum & selectors, milliseconds of start-up
import os

from memoryd_shim import rendezvous
from memoryd_shim.diag import log

CONNECT_DEADLINE_S = 15.0  # per episode: how long to wait for a daemon to answer
RECONNECT_SPAWN_DELAY_S = 0.3  # after a drop, give a service manager's restart a head start
CHILD_EXIT_GRACE_S = 5.0  # our daemon exited (lost the lock?): the winner gets this long to answer
RUN_HINT = "start it with `memoryd serve` or check `memoryd status`"

_children: list = []  # every daemon this shim started; polled so none stays a zombie


class Unreachable(Exception):
    """The episode gave up; the message says what happened and what to run."""


def reap_children() -> None:
    """Collect the exit status of daemons we started that have since exited."""
    for child in list(_children):
        if child.poll() is not None:
            _children.remove(child)


class Connector:
    """Connect to ``socket_path`` and send ``hello``; :meth:`poll` returns the socket (non-blocking) once.

    ``reconnect`` marks an episode after a lost connection: a missing daemon is waited for even without
    ``may_start`` (a service manager may be restarting it), and spawning waits
    :data:`RECONNECT_SPAWN_DELAY_S`. ``socket_arg`` is passed to a spawned daemon as ``--socket``.
    """

    def __init__(
        self,
        socket_path: str,
        socket_arg: str | None,
        hello: bytes,
        may_start: bool,
        reconnect: bool,
        now: float,
    ):
        self.socket_path = socket_path
        self.socket_arg = socket_arg
        self.hello = hello
        self.may_start = may_start
        self.reconnect = reconnect
        self.deadline = now + CONNECT_DEADLINE_S
        self.next_at = now
        self.spawn_at = now + (RECONNECT_SPAWN_DELAY_S if reconnect else 0.0)
        self.attempts = 0
        self.last_error = ""
        self.child = None
        self.child_exit_at: float | None = None
        self.respawned = False  # a daemon we started was killed by a signal and started again
        self.log_path = ""
        self.accepted = False  # some connection was accepted but failed before "ready"
        self.others_starting = False  # another shim holds the spawn lock: its daemon is on its way
        self._lock = None

    def poll(self, now: float) -> _socket.socket | None:
        """Try once if due. Returns a connected socket with the hello sent, ``None`` to wait until
        :attr:`next_at`, or raises :class:`Unreachable`."""
        if now < self.next_at:
            return None
        if now >= self.deadline:
            raise Unreachable(self.unreachable_message(timed_out=True))
        self.attempts += 1
        sock_dir = os.path.dirname(self.socket_path)
        if sock_dir == rendezvous.fallback_dir_str():
            problem = rendezvous.socket_dir_problem(sock_dir)
            if problem:
                raise Unreachable(f"refusing to use the memoryd socket: {problem}")
        sock = self._try_connect()
        if sock is None and self._may_spawn_now(now):
            # The previous lock holder releases it only once its daemon answers: look again before
            # spawning, or a shim that failed just before that moment would start a second daemon.
            sock = self._try_connect()
            if sock is None:
                self._spawn()
        if sock is not None:
            self.close()
            return sock
        self._check_child(now)
        # 10, 20, 40, 80, 160, 250, 250… ms: quick to notice a fresh daemon, gentle on a slow one.
        self.next_at = now + min(0.25, 0.01 * (2 ** min(self.attempts - 1, 5)))
        return None

    def _try_connect(self) -> _socket.socket | None:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            sock.settimeout(1.0)  # a full listen backlog can make connect wait
            sock.connect(self.socket_path)
            sock.sendall(self.hello)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            self.last_error = exc.strerror or str(exc)
            return None
        return sock

    def retry_soon(self, now: float, reason: str) -> None:
        """A connection that failed before the daemon's ``ready``: try again shortly, same deadline."""
        self.last_error = reason
        self.accepted = True
        self.next_at = now + 0.05

    def close(self) -> None:
        """Release the spawn lock (the daemon's socket answers, or the shim is leaving)."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _may_spawn_now(self, now: float) -> bool:
        """Whether to start a daemon now; raises :class:`Unreachable` when we may not and must not wait."""
        if not self.may_start:
            if not self.reconnect:
                raise Unreachable(
                    f"memoryd daemon is not running (nothing answers on {self.socket_path}: "
                    f"{self.last_error}); {RUN_HINT}"
                )
            return False  # after a drop, wait for whoever restarts it (launchd, systemd, a person)
        if self.child is not None or now < self.spawn_at:
            return False
        from memoryd_shim import spawn  # subprocess stays off the fast path

        if self._lock is None:
            self._lock = spawn.SpawnLock(self.socket_path)
        # Another shim holding the lock is starting the daemon right now: keep connecting instead.
        acquired = self._lock.acquire()
        self.others_starting = not acquired
        return acquired

    @property
    def expecting(self) -> bool:
        """Whether a daemon is on its way: one this shim or another shim started (the episode's deadline
        still bounds the wait)."""
        return self.child is not None or self.others_starting

    def _check_child(self, now: float) -> None:
        if self.child is None or self.child.poll() is None:
            return
        if self.child.returncode < 0 and not self.respawned:
            # killed by a signal while it started (the OOM killer, a person): no start-up failure to
            # report, so start one again, once; the next poll spawns unless a daemon answers by then
            self.respawned = True
            self.child = self.child_exit_at = None
            return
        if self.child_exit_at is None:
            self.child_exit_at = now
        elif now >= self.child_exit_at + CHILD_EXIT_GRACE_S:
            raise Unreachable(
                f"memoryd daemon exited with status {self.child.returncode} right after starting; "
                f"see {self.log_path} or run `memoryd serve` to see why"
            )

    def _spawn(self) -> None:
        from memoryd_shim import spawn

        self.log_path = rendezvous.spawn_log_path_str()
        try:
            self.child = spawn.start_daemon(self.socket_arg, self.log_path)
        except OSError as exc:
            raise Unreachable(f"could not start the memoryd daemon ({exc}); {RUN_HINT}") from None
        _children.append(self.child)
        log(
            f"no daemon answered on {self.socket_path}; started one (pid {self.child.pid}, log {self.log_path})"
        )

    def unreachable_message(self, timed_out: bool) -> str:
        """Why this episode failed and what to run, for the JSON-RPC errors and stderr."""
        where = f"{self.socket_path}: {self.last_error or 'no answer'}"
        within = f" within {CONNECT_DEADLINE_S:.0f} s" if timed_out else ""
        if self.reconnect:
            return f"memoryd daemon went away and did not come back{within} ({where}); {RUN_HINT}"
        if self.accepted:
            return (
                f"memoryd daemon accepted the connection but did not answer{within} ({where}); "
                "check `memoryd status` or the daemon log"
            )
        if self.child is not None:
            return (
                f"memoryd daemon was started but did not answer{within} ({where}); "
                f"see {self.log_path}, run `memoryd serve` to see why, or check `memoryd status`"
            )
        return f"memoryd daemon is not running ({where}); {RUN_HINT}"
