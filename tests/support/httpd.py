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


#: Runs the rest of its arguments as a Python command line with RLIMIT_NOFILE set to (argv[1], argv[2]).
_WITH_NOFILE = (
    "import os, resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), int(sys.argv[2])));"
    " os.execv(sys.executable, [sys.executable, *sys.argv[3:]])"
)


class _LimitedDaemon(DaemonProcess):
    """A daemon started with a given soft and hard RLIMIT_NOFILE (``nofile``)."""

    def __init__(self, *args, nofile: tuple[int, int], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.nofile = nofile

    @property
    def argv(self) -> list[str]:
        python, *rest = super().argv
        return [python, "-c", _WITH_NOFILE, *map(str, self.nofile), *rest]


def start_http_daemon(
    port: int | None = None, nofile: tuple[int, int] | None = None, **env: str
) -> HttpDaemon:
    """A daemon serving HTTP on ``port`` (default: a free one), with RLIMIT_NOFILE ``(soft, hard)`` when
    ``nofile`` is given."""
    root = short_tmpdir()
    port = port or free_port()
    kind, extra = (DaemonProcess, {}) if nofile is None else (_LimitedDaemon, {"nofile": nofile})
    proc = kind(root, env={"MEMORYD_TOOL_TIMEOUT_MS": "3000", **env}, args=["--http", str(port)], **extra)
    proc.start()
    deadline = time.monotonic() + 30
    # The socket answers first; HTTP starts right after, and http.json is written once it listens (the
    # engine starts in the same loop turn, so its state is "loading" or later from then on).
    while proc.status().get("http") is None or not (proc.socket.parent / "http.json").exists():
        assert time.monotonic() < deadline and not proc.events("http_failed"), proc.log()
        time.sleep(0.05)
    return HttpDaemon(proc, port)
