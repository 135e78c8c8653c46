"""One MCP session over one accepted socket: lines in, the SDK's (read, write) stream pair, lines out.

This is ``mcp.server.stdio.stdio_server`` for a socket, with these differences:

* every inbound line passes :func:`memoryd.serve.jsonrpc.classify` first, so malformed input is answered here
  instead of being dropped silently by the SDK;
* a request before ``initialize`` in the handshake era, and a request reusing an id still in flight, are
  answered here too (:func:`memoryd.serve.jsonrpc.before_initialize_refusal`, :class:`memoryd.serve.jsonrpc.IdMap`);
* reads are bounded: the ``asyncio.StreamReader`` limit is ``rendezvous.MAX_LINE_BYTES``, and a longer line
  ends this connection only (logged, with a last ``-32600`` line to the peer). Memory per connection stays
  under about twice the cap;
* a line of :data:`memoryd.serve.jsonrpc.OFFLOAD_BYTES` or more is classified in a worker thread, so other
  sessions are served meanwhile (this session's next line waits: its messages keep their order); a request
  from such a line carries its size to the tool boundary (:class:`memoryd.serve.jsonrpc.LineSize`), which
  then checks the arguments in a worker thread too;
* a notification that neither the SDK nor a handler of ours takes (an unknown method) stops here: logged
  once per method name for the whole process (at most :data:`LOGGED_IGNORED_MAX` names), counted per
  session (:attr:`McpConnection.ignored`, in the ``session_closed`` line), nothing else.

Both directions go through one :class:`LineWriter`, so SDK answers and hygiene answers never interleave
inside a line.
"""

from __future__ import annotations

import asyncio

import anyio
import mcp_types as types
from mcp.server.runner import serve_dual_era_loop
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp_types.methods import SPEC_CLIENT_NOTIFICATION_METHODS

from memoryd.errors import INVALID_REQUEST
from memoryd.serve import jsonrpc
from memoryd.serve.app import McpApp, SessionState
from memoryd_shim import rendezvous


class LineWriter:
    """Serialises whole lines onto a ``StreamWriter`` with back-pressure (``drain``)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._lock = asyncio.Lock()

    async def send(self, line: bytes) -> None:
        """Write one newline-terminated line. Raises ``ConnectionError`` when the peer is gone."""
        async with self._lock:
            self._writer.write(line)
            await self._writer.drain()


class LineTooLong(Exception):
    """The peer sent a line longer than ``rendezvous.MAX_LINE_BYTES``."""


async def read_line(reader: asyncio.StreamReader) -> bytes | None:
    """The next line without its ``\\n``; ``None`` at EOF. A last line without ``\\n`` still counts.

    Raises :class:`LineTooLong` past the reader's limit (``rendezvous.MAX_LINE_BYTES``).
    """
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as exc:
        return exc.partial or None
    except asyncio.LimitOverrunError as exc:
        raise LineTooLong(f"line longer than {rendezvous.MAX_LINE_BYTES} bytes") from exc
    return line[:-1]


STOPPING = "daemon is shutting down"
#: Lines answered or dropped here in a row before the pump lets the event loop serve others (such lines
#: never wait on the SDK, and a buffered flood of them would otherwise run without a pause).
YIELD_EVERY = 16
#: How many ignored notification method names the process logs (each once); past them, one line says so.
LOGGED_IGNORED_MAX = 32
_logged_ignored: set[str] = set()


def _log_ignored(log, method: str) -> None:
    """Log an ignored notification method the first time the process sees it (bounded, see above)."""
    name = method[:80]
    if name in _logged_ignored or len(_logged_ignored) > LOGGED_IGNORED_MAX:
        return
    _logged_ignored.add(name)
    if len(_logged_ignored) > LOGGED_IGNORED_MAX:
        log.info("notifications_ignored_unlogged", after=LOGGED_IGNORED_MAX)
        return
    log.info("notification_ignored", method=name, reason="no handler for this method; logged once")


def _restarted(answer: types.JSONRPCError) -> types.JSONRPCError:
    """The SDK's answer to a call cancelled by the shutdown ("Connection closed"), told as agents are told
    of any restart: retrying reaches the next daemon through the shim."""
    if answer.error.code != types.CONNECTION_CLOSED:
        return answer
    error = answer.error.model_copy(update={"message": rendezvous.RESTARTED_MESSAGE})
    return answer.model_copy(update={"error": error})


class McpConnection:
    """The MCP session of one accepted socket (after the hello). :meth:`run` until the peer leaves;
    :meth:`stop` ends it gracefully from outside (daemon shutdown)."""

    def __init__(
        self, app: McpApp, state: SessionState, reader: asyncio.StreamReader, out: LineWriter
    ) -> None:
        self.app = app
        self.state = state
        self.reader = reader
        self.out = out
        self.ids = jsonrpc.IdMap()
        self.ended = "peer closed the connection"
        #: Notifications this session sent that no handler takes (dropped unread by the SDK).
        self.ignored = 0
        self._era_open = True  # until the first request reaches the SDK, which then fixes the era
        # Handshake era until initialize is sent (a stateless-era opening request clears it too); an
        # initialize answered with an error sets it again.
        self._needs_initialize = True
        self._initialize_id: int | None = None
        # Input and the SDK loop live in this scope; the output pump does not, so that on stop() the
        # answers the SDK writes for cancelled in-flight calls ("connection closed") still go out.
        self._inbound_scope = anyio.CancelScope()
        self._read_scope: anyio.CancelScope | None = None  # around the one read in progress
        self._drain_s: float | None = None  # set by stop(): stop reading, let in-flight calls end

    def stop(self, drain_s: float = 0.0) -> None:
        """Stop reading, let in-flight calls finish for up to ``drain_s`` seconds (each is answered with its
        own result), then cancel the rest; a cancelled call gets a connection-closed error answer whose
        message is the one the shim gives when its daemon goes away ("memoryd restarted; please retry").

        A call is cancelled only when it outlives the drain: one that has written the board and waits for
        the index would otherwise be told to retry, and a retry of ``add_memory`` writes its turn twice.
        Lines not read yet are never run (the shim answers them "please retry" when the connection ends)."""
        self.ended = STOPPING
        if self._drain_s is not None:
            return
        self._drain_s = max(0.0, drain_s)
        if self._read_scope is not None:
            self._read_scope.cancel()

    async def run(self) -> str:
        """Serve until EOF, :meth:`stop`, a reset, or an over-cap line; returns why it ended."""
        read_send, read_recv = create_context_streams[SessionMessage | Exception](0)
        write_send, write_recv = create_context_streams[SessionMessage](0)

        async def sdk_loop() -> None:
            await serve_dual_era_loop(
                self.app.server,
                read_recv,
                write_send,
                lifespan_state=self.state,
                init_options=self.app.init_options,
            )

        try:
            async with anyio.create_task_group() as outer:
                outer.start_soon(self._pump_out, write_recv)
                with self._inbound_scope:
                    async with anyio.create_task_group() as inner:
                        inner.start_soon(sdk_loop)
                        # EOF closes the read stream: the SDK loop ends and closes the write stream,
                        # which ends the output pump once it has written everything.
                        await self._pump_in(read_send)
                if self._inbound_scope.cancelled_caught:
                    # The SDK loop was cancelled before it could close its write stream.
                    await write_send.aclose()
        except* LineTooLong:
            pass
        except* (ConnectionError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            self.ended = "peer reset the connection"
        return self.ended

    async def _pump_in(self, read_send) -> None:
        log = self.state.log
        unforwarded = 0  # lines in a row that did not reach the SDK (sending to it lets others run)
        async with read_send:
            while True:
                if unforwarded >= YIELD_EVERY:
                    unforwarded = 0
                    await anyio.lowlevel.checkpoint()
                if self._drain_s is not None:
                    await self._drain()
                    return
                try:
                    # only the wait for a line is cut short by stop(): a line read is handled whole
                    with anyio.CancelScope() as self._read_scope:
                        line = await read_line(self.reader)
                    self._read_scope = None
                    if self._drain_s is not None:
                        continue  # stop() came while waiting: drain at the top of the loop
                except LineTooLong as exc:
                    self.ended = str(exc)
                    log.warning("line_over_cap", limit=rendezvous.MAX_LINE_BYTES)
                    limit = rendezvous.MAX_LINE_BYTES
                    await self.out.send(
                        jsonrpc.error_line(None, INVALID_REQUEST, f"line exceeds {limit} bytes; closing")
                    )
                    raise
                if line is None:
                    return
                unforwarded += 1
                big = len(line) >= jsonrpc.OFFLOAD_BYTES
                # a big line is parsed and checked in a thread; awaiting it keeps this session's order
                verdict = (
                    await anyio.to_thread.run_sync(jsonrpc.classify, line) if big else jsonrpc.classify(line)
                )
                match verdict:
                    case jsonrpc.Forward(types.JSONRPCNotification(method=method)) if self._ignores(method):
                        self.ignored += 1
                        _log_ignored(log, method)
                    case jsonrpc.Forward(message):
                        if self._era_open and (refusal := jsonrpc.era_probe_rejection(message)):
                            log.info("rejected_line", reason=refusal.reason)
                            await self.out.send(refusal.line)
                            continue
                        if self._needs_initialize and (
                            refusal := jsonrpc.before_initialize_refusal(message, self._serves)
                        ):
                            log.info("rejected_line", reason=refusal.reason)
                            await self.out.send(refusal.line)
                            continue
                        mapped = self.ids.inbound(message)
                        if isinstance(mapped, jsonrpc.Reply):
                            log.info("rejected_line", reason=mapped.reason)
                            await self.out.send(mapped.line)
                            continue
                        if isinstance(message, types.JSONRPCRequest):
                            if message.method == "initialize" or (
                                self._era_open and jsonrpc.opens_stateless_era(message)
                            ):
                                self._needs_initialize = False
                            if message.method == "initialize" and isinstance(mapped, types.JSONRPCRequest):
                                self._initialize_id = mapped.id
                            self._era_open = False
                        if mapped is not None:
                            metadata = None
                            if big:  # the tool boundary checks a big line's arguments in a thread too
                                metadata = ServerMessageMetadata(request_context=jsonrpc.LineSize(len(line)))
                            await read_send.send(SessionMessage(mapped, metadata=metadata))
                            unforwarded = 0
                    case jsonrpc.Reply(answer, reason):
                        log.info("rejected_line", reason=reason, bytes=len(line))
                        await self.out.send(answer)
                    case jsonrpc.Drop(reason):
                        log.debug("dropped_line", reason=reason, bytes=len(line))

    async def _drain(self) -> None:
        """After stop(): wait for the calls in flight to be answered, at most ``_drain_s`` seconds; cancel
        whatever is still running then (the SDK answers each, see :meth:`stop`)."""
        with anyio.move_on_after(self._drain_s or 0.0):
            while len(self.ids):
                await anyio.sleep(0.01)
        if len(self.ids):
            self.state.log.info("stop_cancels_calls", in_flight=len(self.ids), drain_s=self._drain_s)
            self._inbound_scope.cancel()

    def _serves(self, method: str) -> bool:
        return self.app.server.get_request_handler(method) is not None

    def _ignores(self, method: str) -> bool:
        """Whether a notification of ``method`` would do nothing: not the spec's (the SDK acts on initialized,
        cancelled and progress, and validates the rest) and no handler of ours takes it. The SDK would drop
        it only after spawning a task for it (a flood cost ~0.45 ms each)."""
        return (
            method not in SPEC_CLIENT_NOTIFICATION_METHODS
            and self.app.server.get_notification_handler(method) is None
        )

    async def _pump_out(self, write_recv) -> None:
        async with write_recv:
            async for item in write_recv:
                if isinstance(item.message, types.JSONRPCError) and item.message.id == self._initialize_id:
                    self._needs_initialize = True  # the handshake failed: still not initialized
                if (message := self.ids.outbound(item.message)) is not None:
                    if self.ended == STOPPING and isinstance(message, types.JSONRPCError):
                        message = _restarted(message)
                    await self.out.send(jsonrpc.encode_message(message))
                else:
                    self.state.log.debug("dropped_late_answer", reason="request was cancelled by the client")
