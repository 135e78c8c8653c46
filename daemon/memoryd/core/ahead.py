"""Embedding ahead: the passages of files a write has just written, embedded while the writer is still
appending the batch before them to LanceDB.

The writer applies one batch at a time: it embeds a batch's passages, then appends them to LanceDB
(~10 ms per batch of 50 here), and only then comes to the next batch. On 2 cores the model is what a
stream of ``store_memories`` batches waits on, so the append should not leave it idle. A write hands the
passages of the files it has just written over (:meth:`Ahead.request`) as it queues their paths; this
module's threads (``memoryd-ahead``) embed them, so the next batch is embedded while the writer appends
the one before. Up to :data:`DEPTH` chunks are embedded at once: their runs share the embedder's queue
(:class:`memoryd.index.runs.Pool`), so when one chunk's last run leaves a core free, the next chunk's
runs start there instead of waiting for the other core's last run (on 2 cores with VNNI, a stream of
batches of 50 short notes at 10,000 memories: 314-324 against 277-289 memories/s, alternated). When the
writer comes to a batch, :meth:`Ahead.embed` gives it the vectors made ahead, waits for those being made,
and embeds the rest itself. (Handed over before the files are written, the embedding competed with the
writing on 2 cores: a lone batch of 50 was answered ~55 ms later for ~50 ms less until searchable.)

A request that arrives while every chunk is taken is also tokenized beside them (:meth:`Ahead.prepare`,
on another thread): the chunk or the writer that embeds it then starts with the model at once.

The writer comes first: the runs of passages it embeds itself go ahead of the chunks' queued runs, so a
writer missing vectors waits for the runs being embedded at most, and for the chunks holding its own
passages; a writer that finds all it needs waits for nothing. Passages it embeds itself are taken off
the requests, so nothing is embedded twice unless a request's write never reaches the writer that way;
such vectors are never claimed and go with the oldest (at most :data:`KEEP` kept) or when the writes
pause (:meth:`Ahead.clear`). Everything here is a head start only: a request that cannot be served (the
thread cannot start, the model fails) leaves the writer to embed as it always did.

A vector made ahead is the passage's own, from the same model; like any vector of the int8 model it moves
slightly with the run it was embedded in (activations are scaled per run: cosine >= 0.998 between two
batchings), as it does with whichever stores the writer happens to batch together. It is used once, and
only by the embedder that made it.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Sequence

from memoryd.logs import get_logger

log = get_logger("memoryd.core.ahead")

#: Passages embedded per step here: what the writer may have to wait for when it wants the model.
CHUNK = 64
#: The same bound in characters (a few long passages are as much work as many short ones).
CHUNK_CHARS = 16_000
#: Vectors kept for the writer to take (~1.5 KB each at 384 dimensions).
KEEP = 512
#: Chunks embedded at once: while one finishes its last run, the next one's runs start on the free cores.
DEPTH = 2
#: Passages kept tokenized for the chunk that will embed them (:meth:`Ahead.prepare`).
KEEP_IDS = 256
#: Seconds :meth:`Ahead.close` waits for a chunk being embedded.
CLOSE_WAIT_S = 5.0
#: Seconds between the waiting thread's checks that the interpreter is not exiting.
IDLE_CHECK_S = 0.5


class Ticket:
    """One request's progress: :attr:`ready` once none of its passages waits for this module's threads
    (each embedded here, or taken over by the writer); it never turns back. A request that failed or was
    dropped at shutdown stays not ready."""

    __slots__ = ("_left", "ready")

    def __init__(self, left: set[str]) -> None:
        self._left = left
        self.ready = not left

    def __call__(self) -> bool:
        return self.ready


class Ahead:
    """Requests from any thread; :data:`DEPTH` threads embedding them; the writer's :meth:`embed`.
    Thread-safe.

    ``on_ready``: called (from the thread that settled it, without the lock) each time a request's
    :class:`Ticket` turns ready."""

    def __init__(self, on_ready=None) -> None:
        self.on_ready = on_ready
        self._cond = threading.Condition()
        self._tickets: list[Ticket] = []  # requests not ready yet
        self._requests: collections.deque[tuple[object, list[str]]] = collections.deque()  # (embedder, texts)
        self._vectors: collections.OrderedDict[str, object] = collections.OrderedDict()
        self._ids: collections.OrderedDict[str, list[int]] = collections.OrderedDict()  # prepare()'s
        self._model: object | None = None  # the embedder the kept vectors came from
        self._running: set[str] = set()  # passages being embedded here now
        self._chunks = 0  # chunks being embedded here
        self._writer_embedding = False  # the writer embeds passages itself
        self._closed = False
        self._threads: list[threading.Thread] = []
        self.requested = 0  # passages handed over
        self.embedded = 0  # passages embedded here
        self.taken = 0  # vectors the writer took from here
        self.prepared = 0  # passages embedded from the ids prepare() made

    @property
    def busy(self) -> bool:
        """Whether a request waits or a chunk is being embedded here."""
        with self._cond:
            return bool(self._requests or self._running)

    def request(self, embedder, texts: Sequence[str]) -> Ticket | None:
        """Embed ``texts`` with ``embedder`` when the model is free: the passages of files just written,
        whose paths the writer is about to take. Returns their :class:`Ticket` (None: nothing requested,
        the module is closed). Raises RuntimeError when a thread cannot start."""
        texts = [t for t in texts if t]
        with self._cond:
            if self._closed or not texts:
                return None
            self._threads = [t for t in self._threads if t.is_alive()]
            while len(self._threads) < DEPTH:
                # not daemon threads: the interpreter's exit waits for their chunks, since a thread still
                # inside onnxruntime when the interpreter finalizes aborts the process
                thread = threading.Thread(target=self._work, name="memoryd-ahead")
                thread.start()
                self._threads.append(thread)
            self._requests.append((embedder, texts))
            self.requested += len(texts)
            made = self._vectors if embedder is self._model else {}
            ticket = Ticket({t for t in texts if t not in made})
            if not ticket.ready:
                self._tickets.append(ticket)
            self._cond.notify_all()
        return ticket

    @property
    def full(self) -> bool:
        """Whether every chunk is taken (:data:`DEPTH` being embedded): a request made now waits for one
        of them to end."""
        with self._cond:
            return self._chunks >= DEPTH

    def prepare(self, embedder, texts: Sequence[str]) -> None:
        """Tokenize requested ``texts`` now, on the calling thread, for the chunk that will embed them.

        Call it while every chunk is taken (:attr:`full`): the tokenizer is Python,
        and run at the head of its chunk it kept the model's cores waiting for the interpreter lock,
        which the next batch's board pass held meanwhile (on 2 cores, ~3 ms of tokenizing per 50 notes
        took 7-14 ms there). Texts already embedded, being embedded or tokenized are skipped; at most
        :data:`KEEP_IDS` are kept, the oldest dropped. Raises what the tokenizer raises."""
        with self._cond:
            if embedder is not self._model:
                return
            todo = [
                t
                for t in dict.fromkeys(texts)
                if t not in self._vectors and t not in self._running and t not in self._ids
            ]
        if not todo:
            return
        ids = embedder.passage_ids(todo)
        with self._cond:
            if embedder is not self._model:
                return
            for text, row in zip(todo, ids, strict=True):
                if text not in self._running:
                    self._ids[text] = row
            while len(self._ids) > KEEP_IDS:
                self._ids.popitem(last=False)

    def _take_ids(self, texts: Sequence[str]) -> list[list[int] | None] | None:
        """Those of ``texts`` :meth:`prepare` tokenized, taken (None per text it did not; None when
        none). Caller holds the lock."""
        if not self._ids:
            return None
        ids = [self._ids.pop(t, None) for t in texts]
        made = sum(row is not None for row in ids)
        self.prepared += made
        return ids if made else None

    def embed(self, embedder, texts: Sequence[str], *, hold: bool = False):
        """Vectors for ``texts`` in order, float32 ``(len(texts), dim)``: those made ahead by ``embedder``,
        those being made (waited for), the rest embedded now for the calling thread (the writer's), its
        runs ahead of the chunks' (``hold``: as ``Embedder.embed_passages``). One such caller at a time.
        Raises what the model raises."""
        import numpy as np

        found: dict[str, object] = {}
        settled = False
        with self._cond:
            try:
                while True:
                    if embedder is self._model:
                        for t in texts:
                            if t not in found and t in self._vectors:
                                found[t] = self._vectors.pop(t)
                    missing = [t for t in dict.fromkeys(texts) if t not in found]
                    if missing and (self._writer_embedding or any(t in self._running for t in missing)):
                        self._cond.wait()
                        continue
                    break
                ids = None
                if missing:
                    self._writer_embedding = True
                    self._unrequest(set(missing))
                    settled = self._settle(missing)
                    if embedder is self._model:
                        ids = self._take_ids(missing)
            finally:
                self._cond.notify_all()
            self.taken += len(found)
        if settled:
            self._tell()
        if missing:
            try:
                vectors = embedder.embed_passages(missing, hold=hold, ids=ids, first=True)
                found.update(zip(missing, vectors, strict=True))
            finally:
                with self._cond:
                    self._writer_embedding = False
                    self._cond.notify_all()
        if not texts:
            return np.empty((0, embedder.dim), np.float32)
        return np.stack([found[t] for t in texts])

    def clear(self) -> None:
        """Forget the vectors no write claimed (the writes paused); requests and a chunk being embedded
        stay."""
        with self._cond:
            if not self._requests and not self._running:
                self._vectors.clear()
                self._ids.clear()
                self._model = None

    def stop(self) -> None:
        """Drop the requests; the threads end after the chunks they are embedding (the writer embeds what
        it still needs itself). Later requests are ignored."""
        with self._cond:
            self._closed = True
            self._requests.clear()
            self._tickets.clear()
            self._cond.notify_all()

    def close(self) -> None:
        """:meth:`stop`, then wait up to :data:`CLOSE_WAIT_S` in all for the threads to end."""
        self.stop()
        deadline = time.monotonic() + CLOSE_WAIT_S
        for thread in list(self._threads):
            thread.join(max(0.0, deadline - time.monotonic()))

    def _settle(self, texts) -> bool:
        """Strike ``texts`` off the open tickets; True when one turned ready. Caller holds the lock."""
        done = False
        for ticket in self._tickets:
            ticket._left.difference_update(texts)
            if not ticket._left:
                ticket.ready = done = True
        if done:
            self._tickets = [t for t in self._tickets if not t.ready]
        return done

    def _tell(self) -> None:
        if self.on_ready is not None:
            try:
                self.on_ready()
            except Exception as exc:  # a head start only: the writer's release re-checks as before
                log.warning("embed_ahead_notify_failed", error=f"{type(exc).__name__}: {exc}")

    # -- the threads -------------------------------------------------------------------------------
    def _unrequest(self, texts: set[str]) -> None:
        """Take ``texts`` off the requests (the writer embeds them itself). Caller holds the lock."""
        if not texts:
            return
        kept = collections.deque()
        for embedder, head in self._requests:
            left = [t for t in head if t not in texts]
            if left:
                kept.append((embedder, left))
        self._requests = kept

    def _next_chunk(self) -> tuple[object, list[str], list | None] | None:
        """The next passages to embed, marked running, with those of their ids :meth:`prepare` made (or
        None), or None when closed: the oldest requests' passages
        of one embedder, whole requests up to the chunk's bounds (many agents' single stores are one run,
        as the writer would batch them; a request larger than the bounds is cut). Caller holds the lock."""
        while True:
            while True:
                if not threading.main_thread().is_alive():  # the interpreter is exiting: no close came
                    self._closed = True
                if self._closed or (self._requests and self._chunks < DEPTH):
                    break
                self._cond.wait(IDLE_CHECK_S)
            if self._closed:
                return None
            embedder = self._requests[0][0]
            if embedder is not self._model:
                self._vectors.clear()
                self._ids.clear()
                self._model = embedder
            chunk: list[str] = []
            chars = 0
            taken: set[str] = set()
            while self._requests and self._requests[0][0] is embedder:
                _, head = self._requests.popleft()
                todo = [
                    t
                    for t in dict.fromkeys(head)
                    if t not in self._vectors and t not in self._running and t not in taken
                ]
                if chunk and (len(chunk) + len(todo) > CHUNK or chars + sum(map(len, todo)) > CHUNK_CHARS):
                    # a request is cut only when it alone passes the bounds: a batch embedded in one
                    # call costs the model ~5 % less than the same batch split across two
                    self._requests.appendleft((embedder, todo))
                    break
                fits = 0
                for text in todo:
                    if chunk and (len(chunk) >= CHUNK or chars + len(text) > CHUNK_CHARS):
                        break
                    chunk.append(text)
                    taken.add(text)
                    chars += len(text)
                    fits += 1
                if fits < len(todo):
                    self._requests.appendleft((embedder, todo[fits:]))
                    break
            if chunk:
                self._running.update(chunk)
                self._chunks += 1
                return embedder, chunk, self._take_ids(chunk)

    def _work(self) -> None:
        while True:
            with self._cond:
                nxt = self._next_chunk()
            if nxt is None:
                return
            embedder, chunk, ids = nxt
            vectors = None
            settled = False
            try:
                vectors = embedder.embed_passages(chunk, hold=True, ids=ids)
            except Exception as exc:  # only the head start is lost: the writer embeds them itself
                log.warning("embed_ahead_failed", error=f"{type(exc).__name__}: {exc}", passages=len(chunk))
            finally:
                with self._cond:
                    self._running.difference_update(chunk)
                    self._chunks -= 1
                    if vectors is None or embedder is not self._model:
                        # their tickets never turn ready: the writer's release admits those writes
                        self._tickets = [t for t in self._tickets if t._left.isdisjoint(chunk)]
                    else:
                        for text, vec in zip(chunk, vectors, strict=True):
                            self._vectors[text] = vec.copy()  # a row alone: not its chunk's whole array
                        while len(self._vectors) > KEEP:
                            self._vectors.popitem(last=False)
                        self.embedded += len(chunk)
                        settled = self._settle(chunk)
                    self._cond.notify_all()
            if settled:
                self._tell()
