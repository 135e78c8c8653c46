"""Restarts the agent never notices, where the shim itself starts the new daemon (no service manager).

Completes the matrix of ``test_shim_daemon.py`` (handshake era: kill -9 and SIGTERM; stateless era:
kill -9) with the stateless era's graceful restart, and runs a whole session under ``env -i`` with only
``HOME`` and launchd's ``PATH`` (what launchd and agents give): the shim finds the socket from ``HOME``,
starts the daemon with its own absolute interpreter, and survives a ``kill -9`` of it.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from test_shim_daemon import (  # noqa: F401  (world and daemon_ready are fixtures)
    MODERN_META,
    START_TIMEOUT_S,
    daemon_ready,
    daemons_with,
    handshake,
    modern_call,
    world,
)

from support.shim import wait_until

LAUNCHD_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"


def test_a_stateless_session_survives_a_graceful_restart(world, shims):  # noqa: F811
    shim = shims("--socket", world.socket, env=world.env)
    shim.send({"jsonrpc": "2.0", "id": "d", "method": "server/discover", "params": {"_meta": MODERN_META}})
    assert "2026-07-28" in shim.recv(timeout=START_TIMEOUT_S)["result"]["supportedVersions"]
    [old] = world.daemons()
    shim.send(modern_call("slow", "diag_sleep", seconds=30))
    time.sleep(0.5)
    os.kill(old, signal.SIGTERM)
    in_flight = shim.recv(timeout=10)
    # the stopping daemon cancels the call itself, or the shim answers it when the connection drops
    assert in_flight["id"] == "slow" and ("error" in in_flight or in_flight["result"].get("isError")), (
        in_flight
    )
    wait_until(lambda: b"lost the daemon connection" in shim.stderr, timeout=10, what="the drop")
    shim.send(modern_call("next", "diag_echo", value="after"))
    answer = shim.recv(timeout=START_TIMEOUT_S)
    assert (
        answer["id"] == "next"
        and answer.get("result", {}).get("structuredContent", {}).get("value") == "after"
    ), (answer, shim.stderr.decode(errors="replace")[-2000:], world.spawn_log())
    wait_until(lambda: old not in world.daemons(), timeout=10, what="the old daemon to finish stopping")
    [new] = world.daemons()
    assert new != old
    shim.expect_silence(0.5)
    assert shim.stdout_is_only_jsonrpc() and len(shim.raw) == 3


@pytest.mark.usefixtures("daemon_ready")
def test_under_env_i_the_shim_starts_the_daemon_and_survives_kill_9(short_dir, shims, models_dir):
    # Only HOME and launchd's PATH: no MEMORYD_* variable, cwd "/". The default model is the one the
    # test suite already built (linked into this HOME's cache), so the daemon loads it instead of building.
    home = Path(short_dir, "h")
    cache = home / ".cache" / "memoryd"
    cache.mkdir(parents=True)
    (cache / "models").symlink_to(models_dir)
    env = {"HOME": str(home), "PATH": LAUNCHD_PATH}
    try:
        shim = shims(env=env, cwd="/")
        handshake(shim, timeout=60)
        [old] = daemons_with(f"HOME={home}\0")
        assert (home / ".local" / "state" / "memoryd" / "memoryd.sock").is_socket()
        environ = Path("/proc", str(old), "environ").read_bytes().split(b"\0")
        assert b"PATH=" + LAUNCHD_PATH.encode() in environ  # the daemon got the same minimal environment
        shim.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert "search_briefs" in {t["name"] for t in shim.recv(timeout=30)["result"]["tools"]}
        os.kill(old, signal.SIGKILL)
        wait_until(lambda: b"lost the daemon connection" in shim.stderr, timeout=10, what="the drop")
        shim.send({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
        answer = shim.recv(timeout=60)
        assert answer["id"] == 3 and "result" in answer, (answer, shim.stderr.decode())
        [new] = daemons_with(f"HOME={home}\0")
        assert new != old
        shim.close_stdin()
        assert shim.wait() == 0
    finally:
        for pid in daemons_with(f"HOME={home}\0"):
            os.kill(pid, signal.SIGKILL)


pytestmark = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds daemons through /proc")
