"""memoryd-shim against the real daemon (``python -m memoryd serve``), as separate processes.

The daemon runs keyword-only (``MEMORYD_MODEL=none``) on an empty temporary board, with the test-only
``_diagnostics`` tools (``MEMORYD_TEST_TOOLS=1``: ``diag_echo``, ``diag_sleep``). Every daemon a test
starts, directly or through a shim, is found by its environment and killed at teardown.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.daemon import INIT, INITIALIZED
from support.shim import wait_until

pytestmark = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds daemons through /proc")

START_TIMEOUT_S = 20.0


def call(id, tool, **arguments):
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }


def _daemon_available() -> str | None:
    try:
        out = subprocess.run(
            [sys.executable, "-m", "memoryd", "serve", "--help"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"memoryd serve cannot run: {exc}"
    if out.returncode != 0 or "--socket" not in out.stdout:
        return f"memoryd serve is not available yet: {out.stderr.strip()[-300:]}"
    return None


@pytest.fixture(scope="module")
def daemon_ready():
    reason = _daemon_available()
    if reason:
        pytest.skip(reason)


def daemons_with(marker: str) -> list[int]:
    """Pids of live (non-zombie) ``memoryd serve`` processes whose environment contains ``marker``."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path("/proc", entry, "cmdline").read_bytes().split(b"\0")
            if b"memoryd" not in cmdline or b"serve" not in cmdline:
                continue
            if marker.encode() not in Path("/proc", entry, "environ").read_bytes():
                continue
            if Path("/proc", entry, "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
        except OSError:
            continue
        pids.append(int(entry))
    return pids


class Env:
    """One test's memoryd world: ``home`` (MEMORYD_HOME, also the marker that finds its daemons), a
    board, a short socket path, and the environment for shims and daemons."""

    def __init__(self, root: str):
        self.home = os.path.join(root, "home")
        self.board = os.path.join(root, "board")
        self.socket = os.path.join(root, "d.sock")
        os.makedirs(self.board)
        self.env = dict(
            os.environ,
            MEMORYD_HOME=self.home,
            MEMORYD_BOARD=self.board,
            MEMORYD_MODEL="none",
            MEMORYD_TEST_TOOLS="1",
        )
        self.env.pop("MEMORYD_SOCKET", None)
        self.env.pop("MEMORYD_NO_START", None)

    def daemons(self) -> list[int]:
        return daemons_with(f"MEMORYD_HOME={self.home}\0")

    def spawn_log(self) -> str:
        path = Path(self.home, "state", "memoryd-spawned.log")
        return path.read_text(errors="replace")[-4000:] if path.exists() else "(no spawn log)"

    def kill_all(self) -> None:
        for pid in self.daemons():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def world(daemon_ready, short_dir, request):
    env = Env(short_dir)
    yield env
    failed = getattr(request.node, "rep_call", None)
    env.kill_all()
    wait_until(lambda: not env.daemons(), timeout=5, what="the test's daemons to exit")
    if failed is not None and failed.failed:
        print("spawned daemon log:\n" + env.spawn_log())


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    setattr(item, "rep_" + outcome.get_result().when, outcome.get_result())


def start_daemon(world: Env) -> subprocess.Popen:
    """``memoryd serve --socket S --board B --model none`` run by the test itself, stderr to a file."""
    log = open(os.path.join(os.path.dirname(world.socket), "daemon.log"), "ab")  # noqa: SIM115 - kept by Popen
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memoryd",
            "serve",
            "--socket",
            world.socket,
            "--board",
            world.board,
            "--model",
            "none",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log,
        env=world.env,
        start_new_session=True,
    )
    log.close()
    return proc


def handshake(shim, timeout: float = START_TIMEOUT_S) -> dict:
    shim.send(INIT)
    answer = shim.recv(timeout=timeout)
    assert answer["id"] == 1 and "result" in answer, answer
    shim.send(INITIALIZED)
    return answer["result"]


def test_initialize_tools_list_and_a_large_call_through_the_shim(world, shims):
    daemon = start_daemon(world)
    # --no-start fails at once when nothing is bound, so the shim starts once the socket exists
    wait_until(lambda: os.path.exists(world.socket), timeout=START_TIMEOUT_S, what="the daemon's socket")
    shim = shims("--socket", world.socket, "--no-start", env=world.env)
    result = handshake(shim)
    assert result["protocolVersion"] and "serverInfo" in result
    shim.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    tools = shim.recv()
    assert tools["id"] == 2
    names = {t["name"] for t in tools["result"]["tools"]}
    assert "diag_echo" in names
    big = "é" * 3_000_000  # ~6 MB of UTF-8 each way
    shim.send(call(3, "diag_echo", value=big))
    echoed = shim.recv(timeout=60)
    assert echoed["id"] == 3 and echoed["result"]["structuredContent"]["value"] == big
    assert shim.stdout_is_only_jsonrpc()
    eof_at = shim.close_stdin()
    assert shim.wait() == 0 and time.monotonic() - eof_at < 1.0
    assert daemon.poll() is None  # the shim leaving does not stop the daemon


def test_the_shim_starts_the_daemon_from_home_alone(world, shims):
    # No --socket, no MEMORYD_SOCKET: shim and daemon both derive <MEMORYD_HOME>/state/memoryd.sock.
    shim = shims(env=world.env, cwd="/")
    handshake(shim)
    [pid] = world.daemons()
    assert os.getsid(pid) == pid != os.getsid(shim.proc.pid)  # detached: its own session
    cmdline = Path("/proc", str(pid), "cmdline").read_bytes().split(b"\0")[:-1]
    assert cmdline == [sys.executable.encode(), b"-m", b"memoryd", b"serve"]
    assert Path(world.home, "state", "memoryd.sock").is_socket()
    shim.close_stdin()
    assert shim.wait() == 0
    assert world.daemons() == [pid]  # still serving after the shim left


def test_requests_piped_in_with_the_input_closed_at_once_are_answered_by_the_daemon_the_shim_starts(world):
    # a script (`printf ... | memoryd-shim`): stdin ends before the daemon it starts can answer its hello
    lines = [
        INIT,
        INITIALIZED,
        call(2, "diag_echo", value="piped"),
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
    ]
    data = b"".join(json.dumps(m).encode() + b"\n" for m in lines)
    done = subprocess.run([sys.executable, "-m", "memoryd_shim"], input=data, capture_output=True, env=world.env,
                          cwd="/", timeout=START_TIMEOUT_S * 2)  # fmt: skip
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == [1, 2, 3], done.stderr.decode(errors="replace")
    assert all("error" not in a for a in answers), answers
    assert answers[1]["result"]["structuredContent"]["value"] == "piped"
    assert done.returncode == 0 and b"started one" in done.stderr
    assert len(world.daemons()) == 1


def test_an_answer_that_takes_seconds_still_arrives_after_the_input_ends(world, shims):
    start_daemon(world)
    wait_until(lambda: os.path.exists(world.socket), timeout=START_TIMEOUT_S, what="the daemon's socket")
    shim = shims("--socket", world.socket, "--no-start", env=world.env)
    handshake(shim)
    shim.send(call(2, "diag_sleep", seconds=1.5))
    shim.close_stdin()
    answer = shim.recv(timeout=10)
    assert answer["id"] == 2 and answer["result"]["structuredContent"] == {"slept_s": 1.5}
    assert shim.wait() == 0


def service_logs(world: Env, *args: str) -> subprocess.CompletedProcess:
    """``memoryd service logs ARGS`` as the person whose agents started the daemon runs it."""
    return subprocess.run([sys.executable, "-m", "memoryd", "service", "logs", *args], capture_output=True,
                          text=True, env=world.env, cwd="/", timeout=60)  # fmt: skip


def test_service_logs_shows_the_log_of_a_daemon_a_shim_started(world, shims):
    """Not run as a service, the daemon a shim started writes no service log: `memoryd service logs` shows
    the file the shim gave it, and says whose it is; with no daemon left, the last one's."""
    shim = shims(env=world.env, cwd="/")
    handshake(shim)
    [pid] = world.daemons()
    spawned = Path(world.home, "state", "memoryd-spawned.log")
    wait_until(lambda: spawned.exists() and spawned.stat().st_size > 0, timeout=10, what="the spawn log")
    done = service_logs(world, "-n", "3")
    assert done.returncode == 0, done
    assert f"(pid {pid}) was started by an agent's shim" in done.stderr and str(spawned) in done.stderr, done
    shown = done.stdout.splitlines()
    assert 0 < len(shown) <= 3 and all(line in spawned.read_text().splitlines() for line in shown), done
    assert not Path(world.home, "logs", "memoryd.log").exists()  # no service log to find
    status = subprocess.run([sys.executable, "-m", "memoryd", "status"], capture_output=True, text=True,
                            env=world.env, cwd="/", timeout=60)  # fmt: skip
    assert f"log       {spawned} (not run as a service)" in status.stdout, status
    shim.close_stdin()
    assert shim.wait() == 0
    world.kill_all()
    wait_until(lambda: not world.daemons(), timeout=5, what="the daemon to exit")
    after = service_logs(world)
    assert after.returncode == 0, after
    assert after.stdout.splitlines() == spawned.read_text().splitlines()[-50:], after
    assert "no daemon is running" in after.stderr and str(spawned) in after.stderr, after
    spawned.unlink()
    gone = service_logs(world)
    assert gone.returncode == 1 and gone.stdout == "", gone
    assert str(spawned) in gone.stderr and str(Path(world.home, "logs", "memoryd.log")) in gone.stderr, gone


def test_five_shims_at_once_end_up_with_exactly_one_daemon(world, shims):
    group = [shims("--socket", world.socket, env=world.env) for _ in range(5)]
    for shim in group:
        shim.send(INIT)
    for shim in group:
        answer = shim.recv(timeout=START_TIMEOUT_S)
        assert answer["id"] == 1 and "result" in answer, answer
    wait_until(lambda: len(world.daemons()) == 1, timeout=10, what="exactly one daemon")
    time.sleep(0.5)
    assert len(world.daemons()) == 1


def test_kill_9_then_a_fresh_shim_works(world, shims):
    first = shims("--socket", world.socket, env=world.env)
    handshake(first)
    [old] = world.daemons()
    first.close_stdin()
    first.wait()
    os.kill(old, signal.SIGKILL)
    wait_until(lambda: not world.daemons(), what="the killed daemon to go")
    assert Path(world.socket).is_socket()  # a stale socket is left behind
    fresh = shims("--socket", world.socket, env=world.env)
    handshake(fresh)
    [new] = world.daemons()
    assert new != old


@pytest.mark.parametrize("how", ["kill -9", "SIGTERM"])
def test_a_live_session_survives_a_daemon_restart(world, shims, how):
    shim = shims("--socket", world.socket, env=world.env)
    handshake(shim)
    [old] = world.daemons()
    shim.send(call(5, "diag_sleep", seconds=30))
    time.sleep(0.5)  # let the call reach the daemon
    os.kill(old, signal.SIGKILL if how == "kill -9" else signal.SIGTERM)
    in_flight = shim.recv(timeout=10)
    assert in_flight["id"] == 5 and "error" in in_flight or in_flight["result"].get("isError"), in_flight
    if how == "kill -9":
        assert in_flight["error"]["message"] == "memoryd restarted; please retry"
    # A stopping daemon may answer the call itself (cancelled) and close a moment later (a request sent in
    # between waits for the next daemon: the test after this one).
    wait_until(lambda: b"lost the daemon connection" in shim.stderr, timeout=10, what="the drop")
    shim.send(call(6, "diag_echo", value="after"))
    answer = shim.recv(timeout=START_TIMEOUT_S)
    assert answer["id"] == 6 and "result" in answer, (answer, shim.stderr.decode())
    assert answer["result"]["structuredContent"]["value"] == "after"
    # A gracefully stopping daemon releases the socket and lock before its last teardown; it must still exit.
    wait_until(lambda: old not in world.daemons(), timeout=15, what="the old daemon's exit")
    [new] = world.daemons()
    assert new != old
    shim.expect_silence(0.5)  # no duplicate for 5, no replayed initialize answer
    assert [json.loads(line)["id"] for line in shim.raw] == [1, 5, 6]


def test_a_retry_sent_the_moment_a_stopping_daemon_says_retry_reaches_the_next_daemon(world, shims):
    # A stopping daemon answers its cancelled calls "please retry" itself, then reads nothing more and
    # closes a moment later: an agent retrying at once must get the next daemon's answer, not that error
    # again from the shim when the connection closes under the retry. (A race: three rounds, so that
    # without the rule a round loses it.)
    shim = shims("--socket", world.socket, env=world.env)
    handshake(shim)
    ids = [1]
    for round in range(3):
        [old] = world.daemons()
        slow, retry = 10 * round + 5, 10 * round + 6
        shim.send(call(slow, "diag_sleep", seconds=30))
        time.sleep(0.5)  # let the call reach the daemon
        os.kill(old, signal.SIGTERM)
        in_flight = shim.recv(timeout=10)
        assert in_flight["id"] == slow and in_flight["error"]["message"] == "memoryd restarted; please retry"
        shim.send(call(retry, "diag_echo", value="at once"))
        answer = shim.recv(timeout=START_TIMEOUT_S)
        assert answer["id"] == retry and "result" in answer, (round, answer, shim.stderr.decode())
        assert answer["result"]["structuredContent"]["value"] == "at once"
        wait_until(lambda old=old: old not in world.daemons(), timeout=15, what="the old daemon's exit")
        ids += [slow, retry]
    shim.expect_silence(0.5)
    assert [json.loads(line)["id"] for line in shim.raw] == ids


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "shim-e2e", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def modern_call(id, tool, **arguments):
    msg = call(id, tool, **arguments)
    msg["params"]["_meta"] = MODERN_META
    return msg


def test_a_stateless_session_survives_kill_9(world, shims):
    shim = shims("--socket", world.socket, env=world.env)
    shim.send({"jsonrpc": "2.0", "id": "d", "method": "server/discover", "params": {"_meta": MODERN_META}})
    discovered = shim.recv(timeout=START_TIMEOUT_S)
    assert discovered["id"] == "d" and "2026-07-28" in discovered["result"]["supportedVersions"]
    [old] = world.daemons()
    shim.send(modern_call("slow", "diag_sleep", seconds=30))
    time.sleep(0.5)
    os.kill(old, signal.SIGKILL)
    assert shim.recv(timeout=10) == {
        "jsonrpc": "2.0",
        "id": "slow",
        "error": {"code": -32000, "message": "memoryd restarted; please retry"},
    }
    shim.send(modern_call("next", "diag_echo", value=[1, "two"]))
    answer = shim.recv(timeout=START_TIMEOUT_S)
    assert answer["id"] == "next" and answer["result"]["structuredContent"]["value"] == [1, "two"], answer
    assert b"reconnected" in shim.stderr
    shim.expect_silence(0.3)


def test_env_i_home_and_path_only_reach_a_running_daemon(world, shims):
    # What launchd and agents give: HOME and a system PATH, no memoryd variable, cwd "/". The daemon was
    # started with the same HOME, so both sides derive the socket from HOME alone.
    home = os.path.join(os.path.dirname(world.socket), "h")
    daemon_env = {k: v for k, v in world.env.items() if not k.startswith(("MEMORYD_HOME", "XDG_"))}
    daemon_env["HOME"] = home
    log = open(os.path.join(os.path.dirname(world.socket), "daemon-home.log"), "ab")  # noqa: SIM115
    subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memoryd",
            "serve",
            "--board",
            world.board,
            "--index",
            os.path.join(home, "index"),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log,
        env=daemon_env,
        start_new_session=True,
    )
    log.close()
    try:
        sock = Path(home, ".local", "state", "memoryd", "memoryd.sock")
        wait_until(sock.exists, timeout=START_TIMEOUT_S, what=f"the daemon's socket at {sock}")
        shim = shims("--no-start", env={"HOME": home, "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"}, cwd="/")
        handshake(shim)
        shim.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert "diag_echo" in {t["name"] for t in shim.recv()["result"]["tools"]}
        shim.close_stdin()
        assert shim.wait() == 0
    finally:
        for pid in daemons_with(f"HOME={home}\0"):
            os.kill(pid, signal.SIGKILL)


def _ready_line(socket_path: str) -> dict:
    """The daemon's answer to a hello on ``socket_path`` (the ready line, with the board it serves)."""
    import socket as stdsocket

    with stdsocket.socket(stdsocket.AF_UNIX, stdsocket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(socket_path)
        sock.sendall(b'{"memoryd":"hello","v":1,"tools":["briefs"],"cwd":"/","pid":1}\n')
        return json.loads(sock.makefile("rb").readline())


def _found(shim, word: str, first_id: int) -> list[str]:
    """``search_briefs`` for ``word`` through ``shim`` until the engine answers; the brief ids found."""
    deadline = time.monotonic() + START_TIMEOUT_S
    n = first_id
    while True:
        shim.send(call(n, "search_briefs", query=word))
        answer = shim.recv(timeout=START_TIMEOUT_S)
        result = answer.get("result") or {}
        if not result.get("isError"):
            return [r["brief_id"] for r in result["structuredContent"]["results"]]
        assert time.monotonic() < deadline, answer  # still warming up after the whole budget
        time.sleep(0.1)
        n += 1


def test_two_homes_whose_socket_paths_are_too_long_never_share_a_daemon(daemon_ready, short_dir, shims):
    # Both homes' <state>/memoryd.sock exceed sun_path, so both fall back to /tmp/memoryd-<uid>/: each
    # must get a socket of its own there, and a shim of the second never reaches the first one's board.
    from memoryd_shim import rendezvous
    from support.board import write_brief, write_task

    worlds = []
    for n, word in enumerate(("cormorant", "halyard")):
        home = os.path.join(short_dir, "h" * 90, f"home{n}")
        board = Path(short_dir, f"board{n}")
        (board / "tasks").mkdir(parents=True)
        write_task(board, f"t-20260101-00000{n}")
        write_brief(board, f"b-20260101-00000{n}", f"t-20260101-00000{n}", said=f"the {word} is loose")
        env = dict(os.environ, MEMORYD_HOME=home, MEMORYD_BOARD=str(board), MEMORYD_MODEL="none")
        for name in ("MEMORYD_SOCKET", "MEMORYD_NO_START", "MEMORYD_INDEX"):
            env.pop(name, None)
        assert len(os.path.join(home, "state", "memoryd.sock").encode()) > rendezvous.MAX_SOCKET_PATH_BYTES
        worlds.append((home, board, env, word, f"b-20260101-00000{n}"))
    sockets = [rendezvous.socket_path_str(env) for _, _, env, _, _ in worlds]
    try:
        opened = []
        for _home, _board, env, word, brief in worlds:
            shim = shims(env=env, cwd="/")  # starts this home's daemon: it computes the same socket
            handshake(shim)
            assert _found(shim, word, 2) == [brief]  # this home's board answered, not the other's
            opened.append(shim)
        for shim, (_home, board, *_), path in zip(opened, worlds, sockets, strict=True):
            assert f"on {path}, serving board {board}".encode() in shim.stderr, shim.stderr
            shim.close_stdin()
            assert shim.wait() == 0
        assert sockets[0] != sockets[1], sockets
        assert all(os.path.dirname(s) == rendezvous.fallback_dir_str() for s in sockets)
        # each home's daemon is still up, on its own socket, serving its own board
        for (home, board, _env, _word, _brief), path in zip(worlds, sockets, strict=True):
            assert len(daemons_with(f"MEMORYD_HOME={home}\0")) == 1
            assert _ready_line(path)["board"] == str(board)
    finally:
        for home, *_ in worlds:
            for pid in daemons_with(f"MEMORYD_HOME={home}\0"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        for home, *_ in worlds:
            wait_until(
                lambda h=home: not daemons_with(f"MEMORYD_HOME={h}\0"), timeout=5, what="the daemons to exit"
            )
        # The shared /tmp/memoryd-<uid> keeps nothing of this test: the sockets a kill -9 leaves, and their
        # lock files (safe to remove once every process that could take them is gone).
        for path in sockets:
            for leftover in (path, path + ".lock", path + ".spawn"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(leftover)


def test_a_daemon_killed_while_it_starts_is_started_again_and_every_shim_is_answered(world, shims):
    """kill -9 of the daemon five shims started together, before it answers (the OOM killer, a person):
    the shim that started it starts one again instead of failing its agent's handshake; one daemon."""
    group = [shims("--socket", world.socket, env=world.env) for _ in range(5)]
    for shim in group:
        shim.send(INIT)
    first = wait_until(world.daemons, timeout=START_TIMEOUT_S, interval=0.005, what="the first daemon")
    for pid in first:
        os.kill(pid, signal.SIGKILL)
    for shim in group:
        answer = shim.recv(timeout=START_TIMEOUT_S * 2)
        assert answer["id"] == 1 and "result" in answer, answer
    wait_until(lambda: len(world.daemons()) == 1, timeout=10, what="exactly one daemon")
    assert not set(world.daemons()) & set(first)
