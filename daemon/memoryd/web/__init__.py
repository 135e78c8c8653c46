"""The page people look at: server-rendered HTML over the same kinds' APIs and answers the tools use.

:func:`routes` is what the HTTP listener mounts at ``/`` behind its token check; nothing here does
authentication. Everything shown comes from the kinds' answers (``kinds/*/render``: redacted and bounded as
in tool answers; screen text never); deletes go through the same API calls as the tools (a memory) or the
hand edits of :mod:`memoryd.kinds.briefs.edits` (a note line, a screenshot). Live updates are server-sent
events from the engine's change feed (:class:`memoryd.core.writequeue.ChangeFeed`).

Modules: ``routes`` (the URL map and handlers), ``pages`` (tasks, a task, sessions), ``search``,
``memview`` (memories and their graph), ``html`` (escaping and the page shell), ``events`` (SSE),
``static/`` (the one stylesheet and script; no inline code, so a strict Content-Security-Policy holds).
"""

from memoryd.web.routes import routes

__all__ = ["routes"]
