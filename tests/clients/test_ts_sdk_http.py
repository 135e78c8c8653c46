"""The official TypeScript SDK client over Streamable HTTP (``StreamableHTTPClientTransport`` with the bearer
token) against a real daemon started with ``--http``: initialize, tools/list, tools/call at the SDK's
latest version and an older one (``ts_sdk_http.mjs``). The pinned SDK has no 2026-07-28 client; that era
is the Python SDK's test (tests/http/test_http_mcp.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from support.briefs import wait_engine_ready
from support.httpd import start_http_daemon

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.timeout(900)
VERSIONS = ["2025-11-25", "2025-06-18"]


def test_typescript_sdk_client_over_http(node, node_modules, tmp_path):
    daemon = start_http_daemon()
    try:
        wait_engine_ready(daemon.proc, timeout=180)  # list_tasks answers from the index
        spec = {"url": daemon.url + "?tools=briefs,memo", "token": daemon.token, "versions": VERSIONS}
        spec_path = tmp_path / "spec.json"
        spec_path.write_text(json.dumps(spec))
        done = subprocess.run(
            [str(node), str(HERE / "ts_sdk_http.mjs"), str(spec_path)], cwd=HERE,
            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        report = json.loads(done.stdout.strip().splitlines()[-1])
        for version in VERSIONS:
            run = report["versions"][version]
            assert run["failures"] == [], json.dumps(run, indent=1) + daemon.proc.log()[-5000:]
            assert run["negotiated"] == version and run["session"]
            assert {"search_briefs", "memo_add", "diag_echo"} <= set(run["tools"])
            assert run["echo"] == {"version": version, "text": "naïve ✓"}
    finally:
        daemon.proc.kill()
        shutil.rmtree(daemon.proc.root, ignore_errors=True)
