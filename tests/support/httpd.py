"""A real daemon serving HTTP (``memoryd serve --http <free port>``, keyword-only, test tools on, 3 s tool
timeout) and a small raw HTTP client (``http.client``: it sends exactly the headers a test gives, ``Host``
included). Used by tests/http and tests/clients."""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass
from pathlib import Path

from support.daemon import DaemonProcess, free_port, short_tmpdir


@dataclass
class HttpDaemon:
    proc: DaemonProcess
    port: int

    @property
    def dir(self) -> Path:
        return self.proc.socket.parent

    @property
    def token(self) -> str:
        return (self.dir / "http.token").read_text().strip()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def request(self, method: str, path: str, *, body=None, headers=None, host: str = "127.0.0.1"):
        """One request; returns ``(status, headers dict (lowercase names), body bytes)``."""
        conn = http.client.HTTPConnection(host, self.port, timeout=20)
        try:
            data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
            conn.request(method, path, body=data, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def auth(self, **more: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", **more}

    def post_mcp(self, message, *, headers=None, path: str = "/mcp"):
        """POST a JSON-RPC body as an MCP client would; returns ``(status, headers, [JSON messages])``
        (the SSE ``data:`` lines, or the JSON body)."""
        h = {
            **self.auth(),
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **(headers or {}),
        }
        status, rh, raw = self.request("POST", path, body=message, headers=h)
        text = raw.decode()
        if rh.get("content-type", "").startswith("text/event-stream"):
            msgs = [
                json.loads(line[5:])
                for line in text.splitlines()
                if line.startswith("data:") and line[5:].strip()
            ]
        else:
            msgs = [json.loads(text)] if text.strip() else []
        return status, rh, msgs


def start_http_daemon(port: int | None = None, **env: str) -> HttpDaemon:
    root = short_tmpdir()
    port = port or free_port()
    proc = DaemonProcess(root, env={"MEMORYD_TOOL_TIMEOUT_MS": "3000", **env}, args=["--http", str(port)])
    proc.start()
    deadline = time.monotonic() + 30
    while proc.status().get("http") is None:  # the socket answers first; HTTP starts right after
        assert time.monotonic() < deadline and not proc.events("http_failed"), proc.log()
        time.sleep(0.05)
    return HttpDaemon(proc, port)
