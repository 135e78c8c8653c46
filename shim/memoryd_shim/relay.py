"""The relay: an agent's stdin/stdout <-> the daemon's Unix socket, one thread, one ``select`` loop.

One module of ~590 lines on purpose: the state machine below is one loop whose states share the held
lines and the replay; split across modules, the "exactly one answer per request" rule could not be read whole.

States (``Relay.state``)::

    CONNECTING  no socket: connect with backoff, start the daemon once if allowed; client lines wait in `held`
    GREETING    connected, hello sent, waiting for the daemon's one-line answer
    REPLAYING   after a reconnect: the client's cached initialize was re-sent under a shim-private id;
                client lines wait until its answer arrives (and is swallowed)
    RELAYING    lines flow both ways, verbatim; once the daemon answered a call "restarted" (it is
                stopping and reads no more), client lines wait in `held` for the next daemon
    FAILED      no daemon: every request gets a JSON-RPC error saying what to run; exit 1 at stdin EOF
                or after a short linger

stdout carries only whole lines: the daemon's, and the shim's own JSON-RPC errors for requests it could not
deliver. Each request read from stdin gets exactly one answer: the daemon's, or one error from the shim.
"""

from __future__ import annotations

import _socket  # not socket: see connect.py
import os
import select
import sys
import time

from memoryd_shim import jsonrpc, rendezvous
from memoryd_shim.connect import Connector, Unreachable, reap_children
from memoryd_shim.diag import log
from memoryd_shim.framing import LineBuffer, TooLong

CONNECTING, GREETING, REPLAYING, RELAYING, FAILED = (
    "connecting",
    "greeting",
    "replaying",
    "relaying",
    "failed",
)

GREETING_TIMEOUT_S = 10.0
REPLAY_TIMEOUT_S = 10.0
EOF_GRACE_S = 0.5  # after stdin EOF with requests held and no daemon on its way: time left to connect
# after stdin EOF, how long answers still owed may take: a client may write its requests and close its input
# at once (a script; a daemon this shim starts answers its hello after ~2 s). Owing nothing, the shim exits
# at once, as agents expect when they close it at shutdown
EOF_ANSWER_S = 30.0
FAILED_LINGER_S = 2.0  # in FAILED, keep answering requests this long when stdin stays open
TICK_S = 0.2  # longest select() wait; bounds how late a dead parent is noticed
READ_CHUNK = 1 << 20
HIGH_WATER_BYTES = 64 * 1024 * 1024  # stop reading stdin while this much waits to go to the daemon
MAX_DAEMON_LINE = 4 * rendezvous.MAX_LINE_BYTES  # a daemon line longer than this means a broken daemon
MAX_DROPS, DROP_WINDOW_S = 5, 60.0  # more drops than this within the window: give up

RESTARTED = rendezvous.RESTARTED_MESSAGE
STOPPING_GRACE_S = 10.0  # how long a daemon that said it is stopping may keep the connection open


class Exit(BaseException):
    """Raised to leave the loop at once with ``code`` (the agent closed our stdout)."""

    def __init__(self, code: int, reason: str):
        super().__init__(reason)
        self.code = code


class _Line:
    """A client line bound for the daemon; ``msg`` is ``None`` for the shim's own replay lines."""

    __slots__ = ("data", "msg", "tracked")

    def __init__(self, data: bytes, msg: jsonrpc.Message | None):
        self.data = data
        self.msg = msg
        self.tracked = False


class Relay:
    """One agent session. ``run()`` returns the exit status; ``close()`` releases the socket and locks.

    ``socket_arg`` is passed to a spawned daemon as ``--socket`` (``None`` when the path came from the
    default rule, which the daemon computes the same way).
    """

    def __init__(self, socket_path: str, socket_arg: str | None, tools: list[str], may_start: bool):
        self.socket_path = socket_path
        self.socket_arg = socket_arg
        self.tools = tools
        self.may_start = may_start
        self.ppid = os.getppid()
        self.state = CONNECTING
        self.sock: _socket.socket | None = None
        self.rbuf = LineBuffer(MAX_DAEMON_LINE)  # from the daemon, not yet split into lines
        self.wire: list[_Line] = []  # lines being sent on the current connection (a handful: lists do)
        self.wire_off = 0  # bytes of wire[0] already sent
        self.held: list[_Line] = []  # client lines waiting for RELAYING
        self.queued_bytes = 0
        self.inbuf = LineBuffer(rendezvous.MAX_LINE_BYTES)  # from stdin, not yet split into lines
        self.stdin_open = True
        self.eof_at = 0.0
        self.inflight: dict[str, list] = {}  # id key -> [id, count]: sent to the daemon, unanswered
        self.init_line: bytes | None = None  # the client's initialize request, replayed after a reconnect
        self.init_msg: jsonrpc.Message | None = None
        self.init_answered = False
        self.initialized_line: bytes | None = None
        self.replay_key: str | None = None
        self.replays = 0
        self.connector: Connector | None = None
        self.greet_deadline = self.replay_deadline = self.failed_at = 0.0
        self.fail_message = ""
        self.drops: list[float] = []
        self.stopping_at = 0.0  # when the daemon answered a call "restarted": it is stopping (0: it is not)

    # ---- the loop -------------------------------------------------------------------------------

    def run(self) -> int:
        self._enter_connecting(time.monotonic(), reconnect=False)
        while True:
            now = time.monotonic()
            code = self._tick(now)
            if code is not None:
                return code
            sock = self.sock
            rlist: list = []
            wlist: list = []
            if self.stdin_open and self.queued_bytes < HIGH_WATER_BYTES:
                rlist.append(0)
            if sock is not None:
                rlist.append(sock)
                if self.wire:
                    wlist.append(sock)
            timeout = min(TICK_S, max(0.0, self._next_timer(now) - now))
            readable, writable, _ = select.select(rlist, wlist, [], timeout)
            if writable and self.sock is sock:
                self._send()
            if sock is not None and sock in readable and self.sock is sock:
                self._recv()
            if 0 in readable:
                self._read_stdin()

    def close(self) -> None:
        """Shut down and close the daemon connection; release the spawn lock. Idempotent."""
        self._close_sock()
        if self.connector is not None:
            self.connector.close()

    def _tick(self, now: float) -> int | None:
        """Timers, child reaping and exit conditions; returns an exit status to stop."""
        if os.getppid() != self.ppid:
            log("parent process died; exiting")
            return 0
        reap_children()
        state = self.state
        if state == CONNECTING:
            self._connect(now)
        elif state == GREETING and now >= self.greet_deadline:
            self._retry(now, "the daemon did not answer the hello")
        elif state == REPLAYING and now >= self.replay_deadline:
            self._drop(now, "the daemon did not answer the replayed initialize")
        elif state == RELAYING and self.stopping_at and now >= self.stopping_at + STOPPING_GRACE_S:
            self._drop(now, "the daemon said it was stopping but kept the connection open")
        state = self.state
        if state == FAILED:
            if not self.stdin_open or now >= self.failed_at + FAILED_LINGER_S:
                return 1
        elif not self.stdin_open:
            if state in (RELAYING, REPLAYING):
                if not self.inflight and not self.wire and not self.held:
                    return 0
                if now >= self.eof_at + EOF_ANSWER_S:
                    self._fail(now, f"memoryd did not answer within {EOF_ANSWER_S:.0f} s of the input's end")
                    return 1
            elif not any(_is_request(i) for i in self.held):
                return 0
            elif now >= self.eof_at + EOF_GRACE_S and not (state == GREETING or self.connector.expecting):
                self._unreachable_now(now)
                return 1
        return None

    def _next_timer(self, now: float) -> float:
        state = self.state
        if state == CONNECTING:
            t = self.connector.next_at
        elif state == GREETING:
            t = self.greet_deadline
        elif state == REPLAYING:
            t = self.replay_deadline
        elif state == FAILED:
            t = self.failed_at + FAILED_LINGER_S
        else:
            t = now + TICK_S
        if not self.stdin_open:
            t = min(t, self.eof_at + (EOF_ANSWER_S if state in (RELAYING, REPLAYING) else EOF_GRACE_S))
        return t

    # ---- connecting ------------------------------------------------------------------------------

    def _enter_connecting(self, now: float, reconnect: bool) -> None:
        if self.connector is not None:
            self.connector.close()
        hello = rendezvous.hello_line(self.tools, _cwd(), os.getpid(), _version())
        self.connector = Connector(self.socket_path, self.socket_arg, hello, self.may_start, reconnect, now)
        self.state = CONNECTING
        self.stopping_at = 0.0
        self._connect(now)

    def _connect(self, now: float) -> None:
        try:
            sock = self.connector.poll(now)
        except Unreachable as exc:
            self._fail(now, str(exc))
            return
        if sock is not None:
            self.sock = sock
            self.state = GREETING
            self.greet_deadline = now + GREETING_TIMEOUT_S

    def _retry(self, now: float, reason: str) -> None:
        """A connection that failed before ``ready``: close it and keep connecting in this episode."""
        self._close_sock()
        self.state = CONNECTING
        self.connector.retry_soon(now, reason)

    def _unreachable_now(self, now: float) -> None:
        """stdin closed while still connecting: fail with the episode's own explanation."""
        self._fail(now, self.connector.unreachable_message(timed_out=False))

    def _greeted(self, now: float, line: bytes) -> None:
        try:
            answer = rendezvous.parse_answer(line)
        except rendezvous.IncompatibleWire as exc:
            version = _daemon_version(line)
            self._fail(now, rendezvous.incompatible_message(self.socket_path, exc.theirs, version))
            return
        except ValueError as exc:
            self._fail(
                now, f"the process on {self.socket_path} does not speak memoryd's wire protocol ({exc})"
            )
            return
        if answer["memoryd"] == "error":
            if answer.get("code") == "incompatible":
                message = rendezvous.incompatible_message(
                    self.socket_path, answer.get("v"), answer.get("version")
                )
            else:
                message = f"memoryd daemon refused the connection: {answer['message']}"
            self._fail(now, message)
            return
        # stderr only (agents keep it in their MCP logs): which daemon, and which board, this session got
        board = answer.get("board")
        serving = f", serving board {board}" if isinstance(board, str) else ""
        if self.connector.reconnect:
            log(f"reconnected to memoryd {answer.get('version', '?')}{serving}")
        else:
            log(f"connected to memoryd {answer.get('version', '?')} on {self.socket_path}{serving}")
        if self.init_answered and self.init_line is not None:
            # Handshake-era session: the new daemon must see initialize + initialized before anything else.
            self.replays += 1
            self.replay_key = jsonrpc.id_key(f"memoryd-shim-replay-{self.replays}")
            replay = jsonrpc.with_id(self.init_line, f"memoryd-shim-replay-{self.replays}")
            self.wire.append(_Line(replay, None))
            self.queued_bytes += len(replay)
            self.state = REPLAYING
            self.replay_deadline = now + REPLAY_TIMEOUT_S
            self._send()
        else:
            self._start_relaying()

    def _replayed(self, line: bytes) -> None:
        """The swallowed answer to a replayed initialize: release the held client lines."""
        self.replay_key = None
        if b'"error"' in line and jsonrpc.classify(line).kind == jsonrpc.RESPONSE:
            log("the restarted daemon answered the replayed initialize with an error")
        held_initialized = any(
            i.msg is not None and i.msg.method == "notifications/initialized" for i in self.held
        )
        if self.initialized_line is not None and not held_initialized:
            self.wire.append(_Line(self.initialized_line, None))
            self.queued_bytes += len(self.initialized_line)
        self._start_relaying()

    def _start_relaying(self) -> None:
        self.state = RELAYING
        self.wire += self.held
        self.held = []
        self._send()

    # ---- losing the connection ---------------------------------------------------------------------

    def _close_sock(self) -> None:
        sock, self.sock = self.sock, None
        self.rbuf.clear()
        if sock is not None:
            try:  # noqa: SIM105 - contextlib would be one more import on the start-up path
                sock.shutdown(_socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def _drop(self, now: float, reason: str) -> None:
        """The daemon connection died after ``ready``: answer what was in flight, keep the rest, reconnect."""
        self._close_sock()
        log(f"lost the daemon connection ({reason}); reconnecting")
        keep: list[_Line] = []
        for index, item in enumerate(self.wire):
            if index == 0 and self.wire_off > 0:
                continue  # partly sent: in flight, answered below
            if item.msg is None or item.msg.kind == jsonrpc.RESPONSE:
                continue  # replay lines are rebuilt; a client response answered the lost connection
            if item.tracked:
                self._untrack(item.msg.key)
                item.tracked = False
            keep.append(item)
        self.wire = []
        self.wire_off = 0
        self.held = keep + self.held
        # The client's initialize that never got its answer is sent again as it is, not failed.
        if self.init_msg is not None and not self.init_answered and self.init_msg.key in self.inflight:
            self._untrack(self.init_msg.key)
            self.held.insert(0, _Line(self.init_line, self.init_msg))
        self.queued_bytes = sum(len(i.data) for i in self.held)
        self.replay_key = None
        self._answer_inflight(RESTARTED)
        self.drops.append(now)
        self.drops = [t for t in self.drops if t >= now - DROP_WINDOW_S]
        if len(self.drops) > MAX_DROPS:
            self._fail(
                now,
                f"memoryd keeps closing the connection ({len(self.drops)} times in a minute); "
                f"check `memoryd status` and the daemon log",
            )
            return
        self._enter_connecting(now, reconnect=True)

    def _fail(self, now: float, message: str) -> None:
        """Give up on the daemon: every request read so far (and later) gets ``message`` as its error."""
        self._close_sock()
        log(message)
        self.state = FAILED
        self.failed_at = now
        self.fail_message = message
        for item in self.wire + self.held:
            if item.msg is not None and item.msg.kind == jsonrpc.REQUEST and not item.tracked:
                self._write_out(jsonrpc.error_line(item.msg.id, jsonrpc.CONNECTION_CLOSED, message))
        self.wire = []
        self.held = []
        self.wire_off = self.queued_bytes = 0
        self._answer_inflight(message)
        if self.connector is not None:
            self.connector.close()

    def _answer_inflight(self, message: str) -> None:
        inflight, self.inflight = self.inflight, {}
        for ident, count in inflight.values():
            for _ in range(count):
                self._write_out(jsonrpc.error_line(ident, jsonrpc.CONNECTION_CLOSED, message))

    # ---- daemon -> stdout ----------------------------------------------------------------------------

    def _recv(self) -> None:
        sock = self.sock
        assert sock is not None
        now = time.monotonic()
        try:
            data = sock.recv(READ_CHUNK)
        except BlockingIOError:
            return
        except OSError as exc:
            data, reason = b"", f"read failed: {exc.strerror or exc}"
        else:
            reason = "the daemon closed the connection"
        if not data:
            if self.state == GREETING:
                self._retry(now, f"{reason} before answering the hello")
            else:
                self._drop(now, reason)  # a partial last line is discarded with the buffer
            return
        for line in self.rbuf.feed(data):
            if self.sock is not sock:
                return  # the connection changed under us (dropped, failed); its buffer is gone
            if isinstance(line, TooLong):
                self._drop(now, f"the daemon sent a line over {MAX_DAEMON_LINE} bytes")
            elif self.state == GREETING:
                self._greeted(now, line)
            else:
                self._from_daemon(line)

    def _from_daemon(self, line: bytes) -> None:
        msg = jsonrpc.classify(line)
        if msg.kind == jsonrpc.RESPONSE:
            if msg.key == self.replay_key:
                self._replayed(line)  # the client already has its initialize answer: swallow this one
                return
            self._untrack(msg.key)
            if self.init_msg is not None and not self.init_answered and msg.key == self.init_msg.key:
                self.init_answered = True
            if not self.stopping_at and _says_restarted(line):
                # The daemon is stopping: it reads no more from this connection and closes it soon. The
                # agent's retry must wait for the next daemon, not be lost with this connection.
                self.stopping_at = time.monotonic()
        self._write_out(line)

    def _write_out(self, data: bytes) -> None:
        """Write one whole line to stdout (blocking: the agent's reading speed is the backpressure)."""
        view = memoryview(data)
        off = 0
        while off < len(data):
            try:
                off += os.write(1, view[off:])
            except BlockingIOError:
                select.select([], [1], [], TICK_S)
            except OSError as exc:  # BrokenPipeError: the agent stopped reading
                raise Exit(0, f"stdout closed ({exc.strerror or exc})") from None

    # ---- stdin -> daemon -----------------------------------------------------------------------------

    def _read_stdin(self) -> None:
        try:
            data = os.read(0, READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._stdin_eof()
            return
        for line in self.inbuf.feed(data):
            self._from_client(line)

    def _stdin_eof(self) -> None:
        self.stdin_open = False
        self.eof_at = time.monotonic()
        for line in self.inbuf.finish():  # a last line without its newline still counts
            self._from_client(line)

    def _from_client(self, line: bytes | TooLong) -> None:
        if isinstance(line, TooLong):
            message = (
                f"request line of {line.length} bytes is over memoryd's limit of "
                f"{rendezvous.MAX_LINE_BYTES} bytes; it was not sent"
            )
            log(message)
            self._write_out(jsonrpc.error_line(jsonrpc.head_id(line.head), jsonrpc.INVALID_REQUEST, message))
            return
        if line[:1] in b" \t\r\n" and not line.strip():
            return  # a blank line carries no message
        msg = jsonrpc.classify(line)
        if self.state == FAILED:
            self._answer_failed(msg)
            return
        if msg.kind == jsonrpc.REQUEST and msg.method == "initialize":
            self.init_line, self.init_msg, self.init_answered = line, msg, False
        elif msg.kind == jsonrpc.NOTIFICATION and msg.method == "notifications/initialized":
            self.initialized_line = line
        elif msg.kind == jsonrpc.RESPONSE and (self.state != RELAYING or self.stopping_at):
            log("dropped a client response meant for a lost daemon connection")
            return
        item = _Line(line, msg)
        self.queued_bytes += len(line)
        if self.state == RELAYING and not self.stopping_at:
            self.wire.append(item)
            self._send()  # now, not after another select(): this is the relay's latency
        else:
            self.held.append(item)

    def _answer_failed(self, msg: jsonrpc.Message) -> None:
        if msg.kind == jsonrpc.REQUEST:
            self._write_out(jsonrpc.error_line(msg.id, jsonrpc.CONNECTION_CLOSED, self.fail_message))
        elif msg.kind == jsonrpc.INVALID:
            self._write_out(jsonrpc.error_line(None, jsonrpc.PARSE_ERROR, "Parse error"))
        elif msg.kind == jsonrpc.OTHER:
            self._write_out(jsonrpc.error_line(None, jsonrpc.INVALID_REQUEST, "Invalid Request"))

    def _send(self) -> None:
        sock = self.sock
        while self.wire and sock is not None:
            item = self.wire[0]
            if not item.tracked and item.msg is not None and item.msg.kind == jsonrpc.REQUEST:
                # Tracked before its first byte leaves: its answer cannot arrive earlier.
                self._track(item.msg)
                item.tracked = True
            try:
                sent = sock.send(memoryview(item.data)[self.wire_off :])
            except BlockingIOError:
                return
            except OSError as exc:
                self._drop(time.monotonic(), f"write failed: {exc.strerror or exc}")
                return
            self.wire_off += sent
            if self.wire_off == len(item.data):
                del self.wire[0]
                self.wire_off = 0
                self.queued_bytes -= len(item.data)

    def _track(self, msg: jsonrpc.Message) -> None:
        entry = self.inflight.get(msg.key)
        if entry is None:
            self.inflight[msg.key] = [msg.id, 1]
        else:
            entry[1] += 1

    def _untrack(self, key: str | None) -> None:
        entry = self.inflight.get(key)
        if entry is not None:
            entry[1] -= 1
            if entry[1] <= 0:
                del self.inflight[key]


def _reserve_std_fds() -> None:
    """Put ``/dev/null`` on a closed fd 0, 1 or 2, so the daemon socket can never take their place."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)  # lowest free fd: the closed one
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


_RESTARTED_BYTES = RESTARTED.encode()


def _says_restarted(line: bytes) -> bool:
    """True for the error a stopping daemon answers its cancelled calls with (``RESTARTED``)."""
    if _RESTARTED_BYTES not in line:
        return False
    from memoryd_shim import wirejson

    try:
        error = wirejson.loads(line).get("error")
    except (ValueError, RecursionError, AttributeError):
        return False
    return isinstance(error, dict) and error.get("message") == RESTARTED


def _is_request(item: _Line) -> bool:
    return item.msg is not None and item.msg.kind == jsonrpc.REQUEST


def _cwd() -> str:
    try:
        return os.getcwd()
    except OSError:  # the agent's working directory was deleted
        return os.environ.get("PWD", "")


def _daemon_version(line: bytes) -> object:
    """The ``version`` field of a daemon's answer line, if it has one (for messages only)."""
    from memoryd_shim import wirejson

    try:
        msg = wirejson.loads(line)
    except (ValueError, RecursionError):
        return None
    return msg.get("version") if isinstance(msg, dict) else None


def _version() -> str:
    from memoryd_shim import __version__

    return __version__


def main(argv: list[str] | None = None) -> int:
    """``memoryd-shim [--socket PATH] [--tools GROUPS] [--no-start]``; returns the exit status.

    0 after stdin EOF, SIGINT, the parent's death or stdout closing (SIGTERM and SIGHUP end the process
    by their default action, status -15 / -1); 1 when no daemon
    could be reached or it refused the hello; 2 for a usage error.
    """
    from memoryd_shim import options

    _reserve_std_fds()
    try:
        opts = options.parse(sys.argv[1:] if argv is None else argv)
    except options.UsageError as exc:
        sys.stderr.write(f"{options.USAGE}\nmemoryd-shim: error: {exc}\n")
        return 2
    if opts is None:
        return 0  # --help / --version were printed
    relay = Relay(opts.socket_path, opts.socket_arg, opts.tools, opts.may_start)
    # No signal handlers: SIGTERM and SIGHUP keep their default action, which ends the process at once,
    # and the kernel then closes the daemon connection; SIGINT arrives as KeyboardInterrupt.
    try:
        return relay.run()
    except Exit as exc:
        return exc.code
    except KeyboardInterrupt:
        return 0
    finally:
        relay.close()
