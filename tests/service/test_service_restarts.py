"""A live agent session through the real shim survives a restart done by the service manager, in both MCP
protocol eras (handshake: ``initialize`` first; stateless: ``server/discover`` and ``_meta`` per request).

The test plays systemd's socket unit (see ``test_activation.Manager``): it owns the listening socket and
starts each ``memoryd serve`` with it (``LISTEN_FDS``). The shim runs with ``--no-start``, as under a
service, so it must wait for the manager's restart rather than start a daemon itself. The request in
flight when the daemon goes gets exactly one error; the next request succeeds on the new daemon; nothing
else reaches the agent's stdout (no duplicate, no replayed ``initialize`` answer).
"""

from __future__ import annotations

import json
import shutil
import signal
import time

import pytest
from test_activation import Manager, wait_status

from support.daemon import INIT, short_tmpdir
from support.shim import ShimProc, wait_until  # noqa: E402

RESTART_TIMEOUT_S = 60.0
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "agent", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def call(id, tool, era: str, **arguments) -> dict:
    msg = {
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    if era == "stateless":
        msg["params"]["_meta"] = MODERN_META
    return msg


@pytest.fixture
def manager():
    root = short_tmpdir()
    mgr = Manager(root)
    yield mgr
    mgr.close()
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("how", ["graceful restart", "kill -9"])
@pytest.mark.parametrize("era", ["handshake", "stateless"])
def test_a_live_session_survives_a_service_manager_restart(manager, era, how):
    first = manager.start_service()
    wait_status(manager.path, first, manager)
    shim = ShimProc(
        ["--socket", str(manager.path), "--no-start"],
        env={"HOME": str(manager.root / "home"), "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"},
        cwd="/",
    )
    try:
        if era == "handshake":
            shim.send(INIT)
            assert shim.recv(timeout=30)["result"]["protocolVersion"] == "2025-06-18"
            shim.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            first_id = 1
        else:
            shim.send(
                {"jsonrpc": "2.0", "id": "d", "method": "server/discover", "params": {"_meta": MODERN_META}}
            )
            assert "2026-07-28" in shim.recv(timeout=30)["result"]["supportedVersions"]
            first_id = "d"
        shim.send(call("slow", "diag_sleep", era, seconds=30))
        time.sleep(0.5)  # let the call reach the daemon

        # The manager restarts the service: SIGTERM (systemctl restart) or a crash, then a new process.
        first.send_signal(signal.SIGTERM if how == "graceful restart" else signal.SIGKILL)
        first.wait(15)
        in_flight = shim.recv(timeout=15)
        assert in_flight["id"] == "slow", in_flight
        # the shim says it on a crash, the stopping daemon on a graceful restart: one message either way
        assert in_flight["error"]["message"] == "memoryd restarted; please retry", in_flight
        wait_until(lambda: b"lost the daemon connection" in shim.stderr, timeout=15, what="the drop")
        second = manager.start_service()

        shim.send(call("next", "diag_echo", era, value=["after", how]))
        answer = shim.recv(timeout=RESTART_TIMEOUT_S)
        assert answer["id"] == "next" and "result" in answer, (answer, shim.stderr.decode(), manager.log())
        assert answer["result"]["structuredContent"]["value"] == ["after", how]
        assert wait_status(manager.path, second, manager)["pid"] == second.pid
        assert b"reconnected" in shim.stderr
        shim.expect_silence(0.5)
        assert [json.loads(line)["id"] for line in shim.raw] == [first_id, "slow", "next"]
        assert shim.stdout_is_only_jsonrpc()
        shim.close_stdin()
        assert shim.wait(10) == 0
    finally:
        shim.kill()
