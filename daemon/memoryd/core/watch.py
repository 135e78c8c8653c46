"""Watch a board folder and say WHICH entries of the record sources' folders changed; the consumer re-reads them.

The folders come from the registry of record sources (:func:`memoryd.core.sources.watched_folders`): the
watcher knows no record kind. Event types are never trusted: editors save by temp file + rename, by renaming
the old file away and creating a new one, or by delete + create; folders vanish bottom-up; one save is a
burst of events. So an event only names the entry of a watched folder it touched (both ends of a move):
``briefs/<id>`` for anything inside that brief's folder, ``memories/<file>``, or the folder itself when it
was created, deleted or moved wholesale. Bursts are coalesced per entry, and the consumer (the source
owning the folder) decides from the final state on disk.

Threads: watchdog's observer (inotify on Linux, FSEvents on macOS) feeds :meth:`BoardWatcher._on_event`,
which only records pending entries. One timer thread of ours (``memoryd-watch``) waits on a condition for the
next debounce deadline, calls ``on_change`` (never concurrently with itself) and, about once a second,
checks that the observer is alive and still watching the same root; if not, it restarts the observer and
reports ``rescan=True``.

Symlinks: watchdog (``follow_symlink=False``) adds inotify watches with ``IN_DONT_FOLLOW`` and never
descends into a symlinked folder, so nothing inside a link's target is ever reported; the link itself is an
entry of its parent (creating ``briefs/<id>`` as a link names that entry, and the gated reader refuses it).
A symlinked root is resolved to its real path here, and re-resolved on every health check.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers.api import BaseObserver

from memoryd.board.gate import is_ignored_name
from memoryd.core.quietwatch import observer as new_observer
from memoryd.core.sources import RecordSource, watched_folders
from memoryd.logs import get_logger

log = get_logger("memoryd.core.watch")

HEALTH_INTERVAL_S = 1.0  # how often the timer thread checks the observer while idle (one stat per check)

# Only events that can change file content or existence. No IN_OPEN / IN_CLOSE_NOWRITE / IN_ACCESS, so the
# consumer re-reading a brief can never trigger another change (a feedback loop), and no DirModifiedEvent
# (a folder's mtime moves whenever an editor drops a swap file in it).
_EVENT_FILTER: list[type[FileSystemEvent]] = [
    FileCreatedEvent,
    DirCreatedEvent,
    FileDeletedEvent,
    DirDeletedEvent,
    FileMovedEvent,
    DirMovedEvent,
    FileModifiedEvent,
    FileAttribEvent,  # `touch` on an existing file
    FileClosedEvent,  # close after writing: the end of a slow write re-arms the debounce
]
_RESCAN = ("rescan", "")


@dataclass(frozen=True)
class Change:
    """What changed on the board since the last callback; re-read these from disk to learn how.

    ``paths``: board-relative POSIX paths of the watched folders' entries that saw any event (added,
    edited or deleted alike): ``briefs/<id>``, ``tasks/<id>.json``, ``memories/<file>``, or a folder
    itself (``briefs``) when it was created, deleted or moved wholesale.
    ``rescan``: events may have been lost (queue overflow, observer restarted, root gone or back):
    reconcile the whole board with the index.
    """

    paths: frozenset[str] = frozenset()
    rescan: bool = False


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: BoardWatcher) -> None:
        self._watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        self._watcher._on_event(event)


class _OverflowSpy(logging.Handler):
    """watchdog 7 handles an inotify queue overflow internally and only logs it; this turns the log into a
    rescan. (FSEvents' "must scan subdirs" flags are not surfaced by watchdog at all: startup reconcile and
    the daemon's healthcheck remain the safety net on macOS.)"""

    def __init__(self, on_overflow: Callable[[], None]) -> None:
        super().__init__(logging.WARNING)
        self._on_overflow = on_overflow

    def emit(self, record: logging.LogRecord) -> None:
        if "overflow" in record.getMessage().lower():
            self._on_overflow()


class BoardWatcher:
    """Watch ``root`` (recursively, never following symlinks) and call ``on_change(Change)`` after bursts.

    ``sources``: the record sources; only their folders are watched (:func:`watched_folders`).
    ``debounce_ms``: quiet time per entry before it is reported; ``max_delay_ms``: an entry that keeps changing is
    still reported this long after its first event (a file written continuously still gets indexed).
    ``on_change`` runs on the watcher's own thread, one call at a time; an exception in it is logged and the
    watcher carries on. A missing root is not an error: the watcher reports ``rescan=True`` once it appears.
    ``last_event_at`` is the ``time.monotonic()`` of the last raw file-system event, or None.
    """

    def __init__(
        self,
        root: Path,
        on_change: Callable[[Change], None],
        sources: Sequence[RecordSource],
        debounce_ms: int = 250,
        *,
        max_delay_ms: int = 1000,
    ) -> None:
        self.root = Path(root)
        self.folders = watched_folders(sources)
        self.last_event_at: float | None = None
        self._on_change = on_change
        self._quiet = debounce_ms / 1000
        self._max_delay = max(max_delay_ms, debounce_ms) / 1000
        self._cond = threading.Condition()  # guards _pending, _stopping, _check_now
        self._pending: dict[tuple[str, str], tuple[float, float]] = {}  # key -> (first, last) monotonic
        self._stopping = False
        self._check_now = False
        self._wake_at = 0.0  # when the timer thread will wake next (it recomputes on every wake-up)
        self._thread: threading.Thread | None = None
        # Observer swaps happen under _obs_lock, never under _cond: observer.stop() joins the dispatcher
        # thread, which may be inside _on_event waiting for _cond.
        self._obs_lock = threading.RLock()
        self._observer: BaseObserver | None = None
        self._watched: tuple[str, int, int] | None = None  # (real path, st_dev, st_ino) being watched
        self._watch_prefix = ""
        self._missing_logged = False
        self._spy = _OverflowSpy(lambda: self._mark(_RESCAN))

    # -- public -------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start observing and the timer thread. Idempotent; never raises for a missing root."""
        with self._obs_lock:
            if self._thread is not None and self._thread.is_alive():
                return
            with self._cond:
                self._stopping = False
                self._pending.clear()
            spied = logging.getLogger("watchdog.observers.inotify_c")
            if not spied.isEnabledFor(logging.WARNING):  # MEMORYD_LOG_LEVEL=error would hide overflows
                spied.setLevel(logging.WARNING)
            spied.addHandler(self._spy)
            # watchdog re-adds the watch of a folder created right under a new folder (it walked it already)
            # and warns with a multi-line text on raw stderr, which would break our JSON log lines. Benign.
            warnings.filterwarnings(
                "ignore", message="Callback with id .* already exists", category=RuntimeWarning
            )
            self._start_observer()
            self._thread = threading.Thread(target=self._run, name="memoryd-watch", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop both threads, waiting at most about ``timeout`` seconds. Pending changes are dropped (the
        startup reconcile picks them up). Safe to call twice, or from inside ``on_change``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        logging.getLogger("watchdog.observers.inotify_c").removeHandler(self._spy)
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._obs_lock:  # waits out a health check that is restarting the observer right now
            self._stop_observer(max(0.0, deadline - time.monotonic()))

    def restart(self) -> None:
        """Replace the observer with a fresh one and report ``rescan=True`` (events may have been lost).
        For the daemon's healthcheck when :meth:`alive` is false or events look stalled. Blocks while the
        old observer's threads are joined (normally milliseconds, at most ~2 s): not on the event loop."""
        log.info("watch.restart", root=str(self.root))
        with self._obs_lock:
            self._stop_observer(2.0)
            self._start_observer()
        self._mark(_RESCAN)

    def alive(self) -> bool:
        """True while the observer thread and its emitter are running (False while the root is missing).
        Never blocks: safe to call from the event loop."""
        obs = self._observer  # no lock: restart() may hold _obs_lock while joining threads
        if obs is None or not obs.is_alive():
            return False
        try:
            emitters = tuple(obs.emitters)
        except RuntimeError:  # the set changed while we copied it: that observer is being stopped
            return False
        return bool(emitters) and all(e.is_alive() for e in emitters)

    # -- observer lifecycle -------------------------------------------------------------------------------

    def _start_observer(self) -> bool:
        with self._obs_lock:
            if self._observer is not None or self._stopping:
                return self._observer is not None
            # A symlinked root is resolved here: watchdog would otherwise watch the link itself.
            real = os.path.realpath(self.root)
            observer: BaseObserver | None = None
            try:
                st = os.stat(real)
                if not stat.S_ISDIR(st.st_mode):  # watchdog would silently watch a file's parent folder
                    raise NotADirectoryError(errno.ENOTDIR, "board root is not a directory", real)
                observer = new_observer()
                observer.schedule(_Handler(self), real, recursive=True, event_filter=_EVENT_FILTER)
                observer.start()
            except OSError as e:
                if observer is not None:
                    observer.stop()  # inotify's reader thread already runs (started in __init__)
                if not self._missing_logged:
                    log.warning("watch.start_failed", root=str(self.root), error=str(e))
                    self._missing_logged = True
                return False
            self._observer, self._watched, self._watch_prefix = observer, (real, st.st_dev, st.st_ino), real
            if self._missing_logged:
                log.info("watch.root_back", root=str(self.root))
                self._missing_logged = False
            log.info("watch.started", root=str(self.root), real=real)
            return True

    def _stop_observer(self, timeout: float) -> None:
        with self._obs_lock:
            obs, self._observer, self._watched = self._observer, None, None
        if obs is not None:
            obs.stop()
            if obs is not threading.current_thread():
                obs.join(timeout)

    def _healthy(self) -> bool:
        """Observer alive and the root still the same directory (not moved away, replaced or re-pointed)."""
        if not self.alive():
            return False
        watched = self._watched
        try:
            real = os.path.realpath(self.root)
            st = os.stat(real)
        except OSError:
            return False
        return watched is not None and watched == (real, st.st_dev, st.st_ino)

    def _check_health(self) -> None:
        with self._obs_lock:
            if self._healthy():
                return
            if self._observer is not None:
                log.warning("watch.observer_lost", root=str(self.root))
                self._stop_observer(1.0)
                self._mark(_RESCAN)  # the board as we knew it is gone: say so even before it comes back
            if self._start_observer():
                self._mark(_RESCAN)  # anything may have happened while we were not watching

    # -- events (watchdog's dispatcher thread) ------------------------------------------------------------

    def _on_event(self, event: FileSystemEvent) -> None:
        # Runs on watchdog's dispatcher thread: an exception here would kill the observer, so never raise.
        try:
            self.last_event_at = time.monotonic()
            paths = [event.src_path, getattr(event, "dest_path", "")]
            for raw in paths:
                if raw:
                    key = self._classify(os.fsdecode(raw))
                    if key is not None:
                        self._mark(key)
        except Exception:
            log.exception("watch.event_failed", event=repr(event))

    def _classify(self, path: str) -> tuple[str, str] | None:
        """Map an absolute event path to a pending key, or None for paths the board does not care about."""
        prefix = self._watch_prefix
        if path == prefix:
            with self._cond:
                self._check_now = True  # the root itself was deleted: the emitter has stopped, restart soon
            return _RESCAN
        if not path.startswith(prefix + os.sep):
            return None
        parts = path[len(prefix) + 1 :].split(os.sep)
        if is_ignored_name(parts[-1]):
            return None
        if parts[0] not in self.folders:
            return None
        return ("path", "/".join(parts[:2]))  # the folder's entry: a brief's folder, a memory's file

    def _mark(self, key: tuple[str, str]) -> None:
        now = time.monotonic()
        with self._cond:
            first, _ = self._pending.get(key, (now, now))
            self._pending[key] = (first, now)
            # a key's deadline only moves later, and a new key's is after every pending one's; waking
            # the timer for each event of a batch of 50 files (it scans the pending keys) cost ~8 ms
            if self._due_at(first, now) < self._wake_at:
                self._cond.notify()

    # -- timer thread -------------------------------------------------------------------------------------

    def _due_at(self, first: float, last: float) -> float:
        return min(last + self._quiet, first + self._max_delay)

    def _run(self) -> None:
        next_health = time.monotonic() + HEALTH_INTERVAL_S
        while True:
            with self._cond:
                while True:
                    if self._stopping:
                        return
                    now = time.monotonic()
                    wake = min([next_health, *(self._due_at(f, la) for f, la in self._pending.values())])
                    if wake <= now or self._check_now:
                        break
                    self._wake_at = wake
                    self._cond.wait(wake - now)
                self._wake_at = 0.0  # awake: _mark need not notify until the next wait
                check, self._check_now = self._check_now or now >= next_health, False
                batch = self._take_due(now)
            if check:
                try:
                    self._check_health()
                except Exception:
                    log.exception("watch.health_failed", root=str(self.root))
                next_health = time.monotonic() + HEALTH_INTERVAL_S
            if batch is not None:
                self._deliver(batch)

    def _take_due(self, now: float) -> Change | None:
        """Pop the keys whose deadline passed (everything, when a rescan is due). Caller holds _cond."""
        rescan = _RESCAN in self._pending and self._due_at(*self._pending[_RESCAN]) <= now
        keys = [k for k, (f, la) in self._pending.items() if rescan or self._due_at(f, la) <= now]
        if not keys:
            return None
        for k in keys:
            del self._pending[k]
        return Change(paths=frozenset(v for kind, v in keys if kind == "path"), rescan=rescan)

    def _deliver(self, change: Change) -> None:
        log.debug("watch.change", paths=sorted(change.paths)[:20], rescan=change.rescan)
        try:
            self._on_change(change)
        except Exception:
            log.exception("watch.callback_failed", root=str(self.root))
