"""The daemon's optional local HTTP listener: MCP Streamable HTTP at ``/mcp`` and the page, both locked to
their owner.

* :mod:`memoryd.http.files`    the token, the port file and the one-time hand-over codes beside the socket
  (standard library only: ``memoryd open`` and ``memoryd connect --http`` read them without the web stack);
* :mod:`memoryd.http.auth`     the guard every request passes: Host/Origin, token (bearer or cookie), the
  ``/open`` hand-over, CSP and the other security headers;
* :mod:`memoryd.http.mcp`      MCP over Streamable HTTP on the SDK's session manager and the daemon's one
  :class:`memoryd.serve.app.McpApp` (the same tool boundary as the socket);
* :mod:`memoryd.http.app`      the Starlette app: ``/mcp``, the page's routes (:mod:`memoryd.web`), the guard;
* :mod:`memoryd.http.listener` uvicorn inside the daemon's event loop, on 127.0.0.1 and ::1 only.
"""
