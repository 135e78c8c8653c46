"""The guard in front of every HTTP route (``/mcp``, ``/open`` and the page's): an ASGI middleware.

Per request, in order (each refusal has an empty body, so it tells a guesser nothing; a browser's page load
refused with 401 gets :data:`SIGNED_OUT_PAGE` instead, the same few static words for everyone):

1. ``Host`` must be exactly one of ``127.0.0.1:<port>``, ``localhost:<port>``, ``[::1]:<port>`` (the
   listener's own names: a DNS-rebound name such as ``evil.example:<port>`` is refused), else **403**;
2. ``Origin``, when present, must be ``http://`` + one of those names (a page of another site, or a
   sandboxed ``null`` origin, is refused even when the browser carries the cookie), else **403**;
3. ``GET /open?token=<t>`` is the browser hand-over: ``t`` is the token or the pending one-time code of
   ``memoryd open`` (:func:`memoryd.http.files.take_handover`); it answers **303** to ``/`` with the cookie
   ``memoryd_token`` (``HttpOnly; SameSite=Strict; Path=/; Max-Age=`` :data:`COOKIE_MAX_AGE_S`: a browser
   restart keeps the page open; a rotated token signs it out), or **401**;
4. everything else needs ``Authorization: Bearer <token>`` or the cookie ``memoryd_token=<token>``
   (compared in constant time), else **401**.

Every response, refusals included, gets the security headers: a strict ``Content-Security-Policy``
(``default-src 'self'``; scripts and styles only from the listener itself or with this request's nonce;
``frame-ancestors 'none'``), ``X-Content-Type-Options: nosniff``, ``X-Frame-Options: DENY``,
``Referrer-Policy: no-referrer``, ``Cross-Origin-Opener-Policy`` / ``-Resource-Policy: same-origin``, and
``Cache-Control: no-store`` unless the route set its own. Any ``Access-Control-*`` header a route might set
is removed: no CORS, ever. A page that needs an inline ``<script>`` or ``<style>`` reads this request's nonce
from ``request.state.csp_nonce`` (``scope["state"]["csp_nonce"]``) and puts it in the tag's ``nonce``.

WebSocket upgrades are refused (nothing here speaks WebSocket).
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memoryd.http import files
from memoryd.logs import get_logger

COOKIE_NAME = "memoryd_token"
#: The page's cookie lasts 30 days (docs/security.md says why it may outlive the browser session).
COOKIE_MAX_AGE_S = 30 * 24 * 3600
#: The body of a 401 to a browser loading a page (``GET`` accepting ``text/html``): static, no hint about
#: the token, under the same headers as every answer. Every other 401 (MCP, API calls) has an empty body.
SIGNED_OUT_PAGE = (
    b'<!doctype html><html lang="en"><meta charset="utf-8"><title>memoryd: signed out</title>'
    b"<p>Signed out: run <code>memoryd open</code> to open the page.</p></html>\n"
)
OPEN_PATH = "/open"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")

log = get_logger("memoryd.http.auth")


def allowed_hosts(port: int) -> frozenset[str]:
    """The ``Host`` values the listener answers to."""
    return frozenset(f"{name}:{port}" for name in LOOPBACK_NAMES)


def content_security_policy(nonce: str) -> str:
    """The one policy of every response; ``nonce`` admits this response's inline scripts and styles."""
    return (
        "default-src 'self'; "
        f"script-src 'self' 'nonce-{nonce}'; "
        f"style-src 'self' 'nonce-{nonce}'; "
        "img-src 'self' data:; "
        "connect-src 'self'; "
        "object-src 'none'; "
        "base-uri 'none'; "
        "form-action 'self'; "
        "frame-ancestors 'none'"
    )


def _header_values(scope: Scope, name: bytes) -> list[str]:
    return [v.decode("latin-1") for k, v in scope.get("headers", ()) if k == name]


def _cookie_values(scope: Scope, name: str) -> list[str]:
    """Every value of cookie ``name`` in the request (a browser may send duplicates from other paths)."""
    out = []
    for header in _header_values(scope, b"cookie"):
        for part in header.split(";"):
            key, sep, value = part.strip().partition("=")
            if sep and key == name:
                out.append(value.strip().strip('"'))
    return out


def _same(offered: str, token: str) -> bool:
    return hmac.compare_digest(offered.encode("utf-8", "replace"), token.encode("ascii"))


class Guard:
    """ASGI middleware: the checks of the module docstring, then ``app``.

    ``token`` is the current bearer token; ``socket_dir`` holds ``memoryd open``'s one-time codes.
    ``port`` is the listening port (the ``Host``/``Origin`` names depend on it).
    """

    def __init__(self, app: ASGIApp, *, token: str, port: int, socket_dir: Path) -> None:
        self.app = app
        self.token = token
        self.socket_dir = socket_dir
        self.hosts = allowed_hosts(port)
        self.origins = frozenset(f"http://{host}" for host in self.hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # a WebSocket: nothing here speaks it
            await send({"type": "websocket.close", "code": 1008})
            return
        nonce = secrets.token_urlsafe(16)
        scope.setdefault("state", {})["csp_nonce"] = nonce
        send = _with_security_headers(send, nonce)
        refusal = self._refusal(scope)
        if refusal is not None:
            status, reason = refusal
            log.info("http_refused", status=status, reason=reason, path=scope.get("path", "")[:200])
            await _empty(send, status)
            return
        if scope.get("path") == OPEN_PATH:
            await self._open(scope, send)
            return
        if not self._authorized(scope):
            log.info("http_refused", status=401, reason="no valid token", path=scope.get("path", "")[:200])
            await _unauthorized(scope, send)
            return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope) -> tuple[int, str] | None:
        hosts = _header_values(scope, b"host")
        if len(hosts) != 1 or hosts[0].lower() not in self.hosts:
            return 403, f"Host {hosts[:2]!r} is not this listener"
        origins = _header_values(scope, b"origin")
        if origins and (len(origins) != 1 or origins[0].lower() not in self.origins):
            return 403, f"Origin {origins[:2]!r} is not this listener"
        return None

    def _authorized(self, scope: Scope) -> bool:
        for value in _header_values(scope, b"authorization"):
            scheme, _, credential = value.strip().partition(" ")
            if scheme.lower() == "bearer" and _same(credential.strip(), self.token):
                return True
        return any(_same(value, self.token) for value in _cookie_values(scope, COOKIE_NAME))

    async def _open(self, scope: Scope, send: Send) -> None:
        """The browser hand-over (module docstring, step 3)."""
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True))
        offered = query.get("token", "")
        ok = scope.get("method") == "GET" and bool(offered)
        ok = ok and (_same(offered, self.token) or files.take_handover(self.socket_dir, offered))
        if not ok:
            log.info("http_refused", status=401, reason="hand-over without a valid token", path=OPEN_PATH)
            await _unauthorized(scope, send)
            return
        cookie = f"{COOKIE_NAME}={self.token}; HttpOnly; SameSite=Strict; Path=/; Max-Age={COOKIE_MAX_AGE_S}"
        log.info("browser_handover")
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [(b"location", b"/"), (b"set-cookie", cookie.encode()), (b"content-length", b"0")],
            }
        )
        await send({"type": "http.response.body", "body": b""})


def _browser_page_load(scope: Scope) -> bool:
    """A browser loading a page: ``GET`` whose ``Accept`` names ``text/html`` (MCP clients ask for JSON or
    an event stream; the page's own script leaves the default)."""
    if scope.get("method") != "GET":
        return False
    return any("text/html" in value.lower() for value in _header_values(scope, b"accept"))


async def _unauthorized(scope: Scope, send: Send) -> None:
    """401: :data:`SIGNED_OUT_PAGE` for a browser's page load, else an empty body."""
    if not _browser_page_load(scope):
        await _empty(send, 401)
        return
    headers = [
        (b"content-type", b"text/html; charset=utf-8"),
        (b"content-length", str(len(SIGNED_OUT_PAGE)).encode()),
    ]
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": SIGNED_OUT_PAGE})


async def _empty(send: Send, status: int) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})


_STRIPPED = (b"content-security-policy", b"x-frame-options", b"referrer-policy", b"x-content-type-options")


def _with_security_headers(send: Send, nonce: str) -> Callable[[Message], object]:
    fixed = [
        (b"content-security-policy", content_security_policy(nonce).encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"x-frame-options", b"DENY"),
        (b"referrer-policy", b"no-referrer"),
        (b"cross-origin-opener-policy", b"same-origin"),
        (b"cross-origin-resource-policy", b"same-origin"),
    ]

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [
                (k, v)
                for k, v in message.get("headers", ())
                if k.lower() not in _STRIPPED and not k.lower().startswith(b"access-control-")
            ]
            if not any(k.lower() == b"cache-control" for k, _ in headers):
                headers.append((b"cache-control", b"no-store"))
            message = {**message, "headers": headers + fixed}
        await send(message)

    return wrapped
