"""A new user's first agent: no daemon runs, the shim starts one with the real model, and the agent's
handshake does not wait for the engine.

The agent's first lines go out together, as an agent CLI sends them at start-up: ``initialize``,
``notifications/initialized``, ``tools/list`` and a ``search_briefs`` call. The search is read by the
daemon right behind ``tools/list``, so when its answer says that it waited for the index to load, the
engine was still loading when ``initialize`` and ``tools/list`` were answered (their answers come first).
No timing is asserted: the order of the answers and what the daemon says are the proof.
"""

from __future__ import annotations

from pathlib import Path

from test_shim_daemon import (  # noqa: F401  (world and daemon_ready are fixtures)
    START_TIMEOUT_S,
    call,
    daemon_ready,
    world,
)

from support.daemon import INIT, INITIALIZED
from support.shim import wait_until

QUERY = "login redirect loop after deploy"


def with_model(env_of) -> dict:
    """``env_of.env`` (a test's world) with the default model (``MEMORYD_MODELS``: the tests' built copy)."""
    env = dict(env_of.env)
    env.pop("MEMORYD_MODEL", None)
    assert env.get("MEMORYD_MODELS"), "the tests' model folder is set by tests/conftest.py"
    return env


def test_handshake_answers_while_the_engine_loads_then_search_works(world, shims):  # noqa: F811
    assert not world.daemons()
    shim = shims("--socket", world.socket, env=with_model(world))
    shim.send(INIT)
    shim.send(INITIALIZED)
    shim.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    shim.send(call(3, "search_briefs", query=QUERY))
    answers = [shim.recv(timeout=START_TIMEOUT_S * 3) for _ in range(3)]
    assert [a["id"] for a in answers] == [1, 2, 3], answers  # handshake first, the search last
    init, listed, found = answers
    assert init["result"]["serverInfo"]["name"] and init["result"]["capabilities"]["tools"] is not None
    assert "search_briefs" in {t["name"] for t in listed["result"]["tools"]}
    result = found["result"]
    assert not result.get("isError"), result
    texts = [block["text"] for block in result["content"]]
    # the daemon's own word that the index was still loading when the search (sent behind tools/list) came
    assert any("waited" in t and "for its index to finish loading" in t for t in texts), texts
    shown = result["structuredContent"]
    assert shown["mode"] in ("keyword", "hybrid") and shown["results"] == []  # a new, empty board
    if shown["mode"] == "keyword":  # the model loads after the index: the answer says why and what to do
        assert "still loading" in shown["mode_note"] and "retry" in shown["mode_note"], shown
    assert len(world.daemons()) == 1
    # a second agent starting now reaches the same daemon
    second = shims("--socket", world.socket, env=with_model(world))
    second.send(INIT)
    assert second.recv(timeout=START_TIMEOUT_S)["id"] == 1
    assert len(world.daemons()) == 1
    for one in (shim, second):
        one.close_stdin()
        assert one.wait() == 0


def test_two_agents_starting_together_share_one_daemon_that_loads_the_model(world, shims):  # noqa: F811
    group = [shims("--socket", world.socket, env=with_model(world)) for _ in range(2)]
    for shim in group:
        shim.send(INIT)
        shim.send(INITIALIZED)
        shim.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    for shim in group:
        assert [shim.recv(timeout=START_TIMEOUT_S * 3)["id"] for _ in range(2)] == [1, 2]
    wait_until(lambda: len(world.daemons()) == 1, timeout=10, what="exactly one daemon")
    spawned = Path(world.home, "state", "memoryd-spawned.log")
    engine_ready = lambda: spawned.exists() and '"engine_ready"' in spawned.read_text()  # noqa: E731
    wait_until(engine_ready, timeout=60, what="the engine")
    assert len(world.daemons()) == 1
