"""A tool call over MCP Streamable HTTP vs over the stdio shim, against one real daemon.

    .venv/bin/python bench/bench_http.py [--calls 300] [--quick] [--out FILE]

One ``memoryd serve --model none --http <free port>`` on an empty board with the test tools on
(``MEMORYD_TEST_TOOLS=1``); the call is ``tools/call diag_echo`` with a small argument, so what is measured
is the transport and the tool boundary, not a search. Three clients, each one session kept open, called
back to back per round in rotating order (the machine's load falls on all three alike):

* **shim**: a ``memoryd-shim --no-start`` subprocess speaking raw MCP lines on stdin/stdout, as an agent
  spawns it (2025-11-25 after ``initialize``);
* **HTTP, 2025-11-25 session**: ``POST /mcp`` with ``Mcp-Session-Id`` and the bearer token on one kept-alive
  connection (``http.client``); the answer comes as one SSE event;
* **HTTP, 2026-07-28 stateless**: the same POST without a session, each request carrying its ``_meta``
  envelope and the ``MCP-Protocol-Version``/``Mcp-Method``/``Mcp-Name`` headers.

Each figure is the client-side time from writing the request to having parsed its answer (p50/p95, ms).
"""

from __future__ import annotations

import http.client
import json
import shutil
import time
from typing import Any

from _util import Report, arg_parser, pct, quiet_env
from support.briefs import Shim
from support.httpd import start_http_daemon

MODERN = "2026-07-28"
ARG = {"value": {"text": "a small argument", "n": 7}}


class Http:
    def __init__(self, port: int, token: str, *, modern: bool) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.modern = modern
        self.headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        self.n = 0
        if modern:
            self.headers |= {
                "MCP-Protocol-Version": MODERN,
                "Mcp-Method": "tools/call",
                "Mcp-Name": "diag_echo",
            }
            self.meta = {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"},
            }
            return
        init = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"},
        }
        _, headers = self._post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        self.headers |= {"Mcp-Session-Id": headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
        self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _post(self, msg: dict) -> tuple[dict | None, dict]:
        self.conn.request("POST", "/mcp", body=json.dumps(msg).encode(), headers=self.headers)
        resp = self.conn.getresponse()
        raw = resp.read().decode()
        headers = {k.lower(): v for k, v in resp.getheaders()}
        if resp.status == 202:
            return None, headers
        assert resp.status == 200, (resp.status, raw[:500])
        if headers.get("content-type", "").startswith("text/event-stream"):
            data = [line[5:] for line in raw.splitlines() if line.startswith("data:") and line[5:].strip()]
            return json.loads(data[-1]), headers
        return json.loads(raw), headers

    def call(self) -> dict:
        self.n += 1
        params: dict = {"name": "diag_echo", "arguments": ARG}
        if self.modern:
            params["_meta"] = self.meta
        answer, _ = self._post({"jsonrpc": "2.0", "id": self.n, "method": "tools/call", "params": params})
        assert answer is not None
        return answer

    def close(self) -> None:
        self.conn.close()


def main() -> None:
    parser = arg_parser(__doc__)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    quiet_env()
    calls = 60 if args.quick else args.calls
    daemon = start_http_daemon(MEMORYD_LOG_LEVEL="warning")
    report = Report(
        "http", "A tool call over Streamable HTTP vs over the stdio shim (diag_echo, one session each)"
    )
    clients: dict[str, Any] = {}
    try:
        shim = Shim(daemon.proc.socket, pump=False).initialize()
        clients = {
            "shim": shim,
            "http 2025-11-25 session": Http(daemon.port, daemon.token, modern=False),
            "http 2026-07-28 stateless": Http(daemon.port, daemon.token, modern=True),
        }
        call = {
            "shim": lambda: shim.request("tools/call", {"name": "diag_echo", "arguments": ARG}),
            **{name: client.call for name, client in clients.items() if name != "shim"},
        }
        names = list(clients)
        for name in names:  # warm-up: first calls pay for imports and caches
            for _ in range(10):
                call[name]()
        times: dict[str, list[float]] = {name: [] for name in names}
        for i in range(calls):
            for name in names[i % 3 :] + names[: i % 3]:
                t0 = time.perf_counter()
                answer = call[name]()
                times[name].append((time.perf_counter() - t0) * 1000)
                assert answer["result"]["structuredContent"]["value"] == ARG["value"], answer
        shim_p50 = pct(times["shim"], 0.5)
        for name in names:
            p50, p95 = pct(times[name], 0.5), pct(times[name], 0.95)
            base = {} if name == "shim" else {"baseline": shim_p50, "baseline_label": "shim p50"}
            report.row(f"{name}: p50", round(p50, 3), "ms", **base)
            report.row(f"{name}: p95", round(p95, 3), "ms")
        report.note(f"{calls} calls per client after 10 warm-up calls, interleaved in rotating order")
        report.raw = {name: sorted(v) for name, v in times.items()}
        report.finish(args.out)
    finally:
        for client in clients.values():
            client.close()
        daemon.proc.stop()
        shutil.rmtree(daemon.proc.root, ignore_errors=True)


if __name__ == "__main__":
    main()
