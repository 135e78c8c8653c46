"""An observer that drops, where they enter watchdog, the events of files no board reader ever reads.

Every board write (:mod:`memoryd.board.atomic`) goes through a dotfile temp: create, write, close, then a
link or rename to the final name, then the temp's unlink. The watcher needs only the final name's event,
and :func:`memoryd.board.gate.is_ignored_name` drops the rest in our handler, but by then each raw inotify
event has crossed three of watchdog's threads (its reader, the move grouper and emitter, the observer's
dispatcher) as several Python objects: ~4 of every 5 events of a ``store_memories`` batch, about a tenth
of its CPU beside the model on 2 cores. Here they stop at the watch group, on watchdog's reader thread.

Only create, modify, attribute, close-after-write and delete events of *files* with an ignored name, in a
folder below the root, are dropped: the root's own are kept (the daemon's health check creates a dotfile
there to see that events flow, :attr:`memoryd.core.watch.BoardWatcher.last_event_at`), moves are kept whole (a rename pairs its two halves, and a temp renamed over a board file is how
editors and our writer replace one), and every folder event is kept (recursive watches are added and
moved on them). An editor's swap file is exactly such a name, so dropping its events changes no answer.

The link that creates a memory file a store has already handed to the index (``write_new(echo=False)``,
:func:`memoryd.board.atomic.own_link`) is dropped here too: the writer reads that file anyway, and the
echo only cost the watcher's threads and a pass of the writer that found the file as it had read it. Only
that one creation event, once: a hand edit after it comes as a write, a close or a rename, all kept.

Linux (inotify) only; elsewhere :func:`observer` is watchdog's own. The hook is watchdog 7's
``InotifyWatchGroup.on_event`` (``watchdog>=7.1,<8`` in ``pyproject.toml``); if that class is not there,
watchdog's own observer is used and only the CPU saving is lost.
"""

from __future__ import annotations

import os

from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from memoryd.board.atomic import own_link
from memoryd.board.gate import is_ignored_name

try:  # Linux only
    from watchdog.observers.inotify import InotifyEmitter, InotifyObserver, InotifyWatchGroup
    from watchdog.observers.inotify_c import InotifyConstants, InotifyEvent
except ImportError:  # pragma: no cover - macOS, BSD, Windows
    InotifyWatchGroup = None  # type: ignore[assignment,misc]

if InotifyWatchGroup is not None:
    # what a file's own write makes; IN_MOVED_FROM / IN_MOVED_TO are never dropped
    _DROPPABLE = (
        InotifyConstants.IN_CREATE
        | InotifyConstants.IN_MODIFY
        | InotifyConstants.IN_ATTRIB
        | InotifyConstants.IN_CLOSE_WRITE
        | InotifyConstants.IN_DELETE
    )

    class _QuietGroup(InotifyWatchGroup):
        def on_event(self, event: InotifyEvent) -> None:
            try:
                if self._dropped(event):
                    return
            except Exception:  # never lose an event to this shortcut: watchdog's path takes it
                pass
            super().on_event(event)

        def _dropped(self, event: InotifyEvent) -> bool:
            mask = event.mask
            if not event.name or mask & (InotifyConstants.IN_ISDIR | ~_DROPPABLE):
                return False
            name = os.fsdecode(event.name)
            if is_ignored_name(name):  # the root's own are the health check's probe
                return self._active_callbacks_by_watch.get(event.wd) != self.path
            return bool(mask & InotifyConstants.IN_CREATE) and own_link(name)

    class _QuietEmitter(InotifyEmitter):
        def on_thread_start(self) -> None:  # InotifyEmitter's, with our group
            self._inotify = _QuietGroup(
                self._inotify_fd,
                os.fsencode(self.watch.path),
                is_recursive=self.watch.is_recursive,
                event_mask=self.get_event_mask_from_filter(),
                follow_symlink=self.watch.follow_symlink,
            )

    class _QuietObserver(InotifyObserver):
        def __init__(self) -> None:
            super().__init__()
            self._emitter_class = _QuietEmitter


def observer() -> BaseObserver:
    """A new, unstarted observer for :class:`memoryd.core.watch.BoardWatcher` (see the module docstring)."""
    if InotifyWatchGroup is not None and isinstance(Observer, type) and issubclass(Observer, InotifyObserver):
        return _QuietObserver()
    return Observer()
