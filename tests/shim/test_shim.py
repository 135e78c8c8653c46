"""memoryd-shim as a real process: no daemon, a test-only EchoPeer on the socket, exits, reconnects, spawning.

None of these need ``memoryd serve``; ``test_shim_daemon.py`` covers the shim against the real daemon.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import memoryd_shim
from memoryd_shim import rendezvous
from support.daemon import INIT, INITIALIZED
from support.shim import SHIM_SCRIPT, kill_session, wait_until


def req(id, method="tools/list", **params):
    msg = {"jsonrpc": "2.0", "id": id, "method": method}
    if params:
        msg["params"] = params
    return msg


def handshake(shim, peer):
    """initialize + initialized through the shim; returns the initialize answer."""
    shim.send(INIT)
    answer = shim.recv()
    shim.send(INITIALIZED)
    wait_until(lambda: any(m.get("method") == "notifications/initialized" for m in peer.messages()))
    return answer


# ---- no daemon -------------------------------------------------------------------------------------------


def test_no_start_without_daemon_answers_each_request_and_exits_nonzero(shims, sock_path):
    shim = shims("--socket", sock_path, "--no-start")
    shim.send(INIT)
    shim.send(INITIALIZED)
    shim.send(req("a"))
    shim.send(req(0))
    shim.send(b"not json\n")
    answers = [shim.recv() for _ in range(4)]
    eof_at = shim.close_stdin()
    assert shim.wait(timeout=5) != 0
    assert time.monotonic() - eof_at < 1.0
    assert [a["id"] for a in answers] == [1, "a", 0, None]
    for a in answers[:3]:
        assert a["error"]["code"] == -32000
        assert "memoryd serve" in a["error"]["message"] and "not running" in a["error"]["message"]
    assert answers[3]["error"]["code"] == -32700
    shim.expect_silence(0.1)  # the notification got no answer
    assert shim.stdout_is_only_jsonrpc()
    assert b"not running" in shim.stderr


def test_memoryd_no_start_env_also_prevents_spawning(shims, short_dir):
    env = dict(os.environ, MEMORYD_NO_START="1", MEMORYD_SOCKET=os.path.join(short_dir, "none.sock"))
    shim = shims(env=env)
    shim.send(req(5))
    assert "not running" in shim.recv()["error"]["message"]
    shim.close_stdin()
    assert shim.wait() == 1
    assert not os.path.exists(os.path.join(short_dir, "none.sock.spawn"))  # never tried to start one


def test_usage_error_exits_2_with_nothing_on_stdout(shims):
    shim = shims("--tools", "nope")
    assert shim.wait() == 2
    assert shim.raw == []
    assert b"unknown tool group" in shim.stderr and b"usage:" in shim.stderr


# ---- relaying through the EchoPeer ---------------------------------------------------------------------


def test_minimal_env_and_root_cwd_find_the_socket_from_home(shims, peers, short_dir):
    # What agents give the shim: HOME and a few more, nothing memoryd-specific, cwd "/".
    home = os.path.join(short_dir, "home")
    path = rendezvous.socket_path_str({"HOME": home})
    assert path.startswith(home)
    peer = peers(path)
    env = {
        "HOME": home,
        "PATH": "/usr/bin:/bin",
        "LOGNAME": "u",
        "USER": "u",
        "SHELL": "/bin/sh",
        "TERM": "dumb",
    }
    shim = shims("--no-start", env=env, cwd="/", script=True)
    assert shim.proc.args[0] == str(SHIM_SCRIPT)
    answer = handshake(shim, peer)
    assert answer["id"] == 1 and answer["result"]["method"] == "initialize"
    hello = peer.hellos[0]
    assert hello["memoryd"] == "hello" and hello["v"] == 1
    assert hello["cwd"] == "/" and hello["tools"] == ["briefs"] and hello["pid"] == shim.proc.pid
    shim.close_stdin()
    assert shim.wait() == 0


@pytest.mark.parametrize("flags", [[], ["-S"]], ids=["site", "no-site"])
def test_the_package_main_runs_as_a_file_without_runpy_or_site(shims, peers, sock_path, flags):
    """``python [-S] <...>/memoryd_shim/__main__.py``: the quickest start (no runpy, optionally no site)."""
    main_file = Path(memoryd_shim.__file__).with_name("__main__.py")
    peer = peers(sock_path)
    shim = shims("--socket", sock_path, "--no-start", command=[sys.executable, *flags, str(main_file)])
    handshake(shim, peer)
    shim.send(req(1))
    assert shim.recv()["result"]["method"] == "tools/list"
    shim.close_stdin()
    assert shim.wait() == 0
    assert shim.stdout_is_only_jsonrpc()


def test_relays_lines_verbatim_both_ways(shims, peers, sock_path):
    peer = peers(sock_path)
    shim = shims("--socket", sock_path, "--tools", "memo,sessions", "--no-start")
    handshake(shim, peer)
    assert peer.hellos[0]["tools"] == ["memo", "sessions"]
    odd = b'{ "jsonrpc" : "2.0",  "id" : "0", "method":"x/y", "params":{"echo":"\xc3\xa9\\u00e9"} }\n'
    shim.send(odd)
    shim.send(req(0))
    shim.send(req(1.5))
    got = {json.dumps(m["id"]): m for m in (shim.recv(), shim.recv(), shim.recv())}
    assert set(got) == {'"0"', "0", "1.5"}  # ids keep their JSON type
    assert got['"0"']["result"]["echo"] == "éé"
    assert odd in [line for _, line in peer.received]  # byte for byte, odd spacing included
    pushed = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info", "data":"hi"}}\n'
    peer.send(0, pushed)
    assert shim.recv() == json.loads(pushed)
    assert shim.raw[-1] == pushed  # byte for byte
    shim.send(INITIALIZED)  # a notification from the client: forwarded, never answered
    shim.expect_silence(0.2)
    assert shim.stdout_is_only_jsonrpc()


def test_large_lines_pass_both_ways(shims, peers, sock_path):
    peer = peers(sock_path)
    shim = shims("--socket", sock_path, "--no-start")
    handshake(shim, peer)
    payload = "ab\u00e9\u6f22" * (1_500_000)  # ~13.5 MB of UTF-8 each way
    shim.send(req(9, "tools/call", echo=payload))
    answer = shim.recv(timeout=30)
    assert answer["id"] == 9 and answer["result"]["echo"] == payload
    shim.send(req(10))
    assert shim.recv()["id"] == 10


def test_partial_writes_both_ways(shims, peers, sock_path):
    peer = peers(sock_path, dribble=True)  # answers arrive five bytes at a time
    shim = shims("--socket", sock_path, "--no-start")
    handshake(shim, peer)
    data = json.dumps(req(3, "tools/call", echo="x" * 300)).encode() + b"\n"
    for i in range(0, len(data), 7):  # and the request leaves the agent seven bytes at a time
        shim.send(data[i : i + 7])
        time.sleep(0.001)
    answer = shim.recv()
    assert answer["id"] == 3 and answer["result"]["echo"] == "x" * 300
    assert shim.stdout_is_only_jsonrpc()


def test_over_long_line_gets_an_error_and_the_session_goes_on(shims, peers, sock_path):
    peer = peers(sock_path)
    shim = shims("--socket", sock_path, "--no-start")
    handshake(shim, peer)
    big = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"echo":"' + b"z" * (
        rendezvous.MAX_LINE_BYTES + 10
    )
    shim.send(big + b'"}}\n')
    refused = shim.recv(timeout=30)
    assert refused["id"] == 7 and refused["error"]["code"] == -32600
    assert "limit" in refused["error"]["message"]
    # id after the huge member: not found cheaply, so the error carries id null
    shim.send(
        b'{"jsonrpc":"2.0","method":"tools/call","params":{"echo":"'
        + b"z" * (rendezvous.MAX_LINE_BYTES + 10)
        + b'"},"id":8}\n'
    )
    assert shim.recv(timeout=30)["id"] is None
    shim.send(req(9))
    assert shim.recv()["id"] == 9
    assert all(len(line) < 1000 for _, line in peer.received)  # the big lines never reached the peer
    assert shim.stdout_is_only_jsonrpc()


# ---- exits ---------------------------------------------------------------------------------------------


def test_exits_within_1s_of_stdin_eof_and_closes_the_connection(shims, peers, sock_path):
    peer = peers(sock_path)
    shim = shims("--socket", sock_path, "--no-start")
    handshake(shim, peer)
    eof_at = shim.close_stdin()
    assert shim.wait(timeout=5) == 0
    assert time.monotonic() - eof_at < 1.0
    wait_until(lambda: 0 in peer.closed, timeout=2, what="the peer to see the connection closed")


def test_eof_still_delivers_an_answer_that_arrives_soon(shims, peers, sock_path):
    peer = peers(sock_path)
    shim = shims("--socket", sock_path, "--no-start")
    handshake(shim, peer)
    shim.send(req(4, "test/hold"))
    wait_until(lambda: any(m.get("id") == 4 for m in peer.messages()))
    eof_at = shim.close_stdin()
    time.sleep(0.2)
    peer.send(0, {"jsonrpc": "2.0", "id": 4, "result": {"late": True}})
    assert shim.recv()["result"] == {"late": True}
    assert shim.wait() == 0
    assert time.monotonic() - eof_at < 1.0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_exits_within_1s_of_a_signal_and_closes_the_connection(shims, peers, sock_path, sig):
    peer = peers(sock_path)
    shim = shims("--socket", sock_path, "--no-start", default_signals=True)
    handshake(shim, peer)
    sent_at = time.monotonic()
    shim.proc.send_signal(sig)
    shim.wait(timeout=5)
    assert time.monotonic() - sent_at < 1.0
    wait_until(lambda: 0 in peer.closed, timeout=2, what="the peer to see the connection closed")


def test_exits_within_1s_when_its_parent_dies(peers, sock_path):
    peer = peers(sock_path)
    stdin_r, stdin_w = os.pipe()  # the test keeps stdin open: only the parent's death can end the shim
    out_r, out_w = os.pipe()
    parent_code = textwrap.dedent(
        """
        import subprocess, sys, time
        p = subprocess.Popen([sys.executable, "-m", "memoryd_shim", "--socket", sys.argv[1], "--no-start"],
                             stdin=int(sys.argv[2]), stdout=int(sys.argv[3]), pass_fds=(int(sys.argv[2]), int(sys.argv[3])))
        print(p.pid, flush=True)
        time.sleep(60)
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", parent_code, sock_path, str(stdin_r), str(out_w)],
        stdout=subprocess.PIPE,
        pass_fds=(stdin_r, out_w),
    )
    os.close(stdin_r)
    os.close(out_w)
    try:
        shim_pid = int(parent.stdout.readline())
        wait_until(lambda: peer.hellos, what="the shim to connect")
        assert peer.hellos[0]["pid"] == shim_pid
        killed_at = time.monotonic()
        parent.kill()
        parent.wait()
        os.set_blocking(out_r, True)
        assert os.read(out_r, 100) == b""  # EOF: every holder of the shim's stdout is gone
        assert time.monotonic() - killed_at < 1.0
        wait_until(lambda: 0 in peer.closed, timeout=2, what="the peer to see the connection closed")
    finally:
        parent.kill()
        parent.wait()
        os.close(stdin_w)
        os.close(out_r)


# ---- the daemon's answer to the hello --------------------------------------------------------------------


def test_a_refused_hello_answers_pending_requests_with_the_daemons_message(shims, peers, sock_path):
    peers(sock_path, refuse="this daemon speaks wire v2; run `memoryd service restart`")
    shim = shims("--socket", sock_path, "--no-start")
    shim.send(INIT)
    answer = shim.recv()
    assert answer["id"] == 1 and "wire v2" in answer["error"]["message"]
    shim.close_stdin()
    assert shim.wait() == 1


def test_a_stranger_on_the_socket_is_reported(shims, short_dir, sock_path):
    import socket
    import threading

    server = socket.socket(socket.AF_UNIX)
    server.bind(sock_path)
    server.listen(1)

    def answer_garbage():
        conn, _ = server.accept()
        conn.recv(1000)
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        time.sleep(1)
        conn.close()

    threading.Thread(target=answer_garbage, daemon=True).start()
    shim = shims("--socket", sock_path, "--no-start")
    shim.send(req(2))
    assert "wire protocol" in shim.recv()["error"]["message"]
    shim.close_stdin()
    assert shim.wait() == 1
    server.close()


# ---- reconnects ----------------------------------------------------------------------


def test_reconnect_replays_initialize_and_fails_only_what_was_in_flight(shims, peers, sock_path):
    first = peers(sock_path)
    shim = shims("--socket", sock_path, "--no-start")  # --no-start: wait for the "restarted" daemon
    handshake(shim, first)
    shim.send(req(2, "test/hold"))
    wait_until(lambda: any(m.get("id") == 2 for m in first.messages()))
    first.crash()
    failed = shim.recv()
    assert failed == {
        "jsonrpc": "2.0",
        "id": 2,
        "error": {"code": -32000, "message": "memoryd restarted; please retry"},
    }
    second = peers(sock_path)
    shim.send(req(3))  # sent while no daemon is there: held, then delivered
    answer = shim.recv(timeout=5)
    assert answer["id"] == 3 and answer["result"]["conn"] == 0
    replayed = second.messages()
    assert replayed[0]["method"] == "initialize" and replayed[0]["params"] == INIT["params"]
    assert replayed[0]["id"] != 1 and str(replayed[0]["id"]).startswith("memoryd-shim-replay")
    assert replayed[1] == INITIALIZED
    assert replayed[2]["id"] == 3
    shim.send(req(4))
    assert shim.recv()["id"] == 4
    shim.expect_silence(0.3)  # no second initialize answer, no second error for id 2
    assert [json.loads(line)["id"] for line in shim.raw] == [1, 2, 3, 4]
    assert b"reconnected" in shim.stderr


def test_reconnect_resends_an_initialize_that_was_never_answered(shims, peers, sock_path):
    first = peers(sock_path, hold=("initialize",))
    shim = shims("--socket", sock_path, "--no-start")
    shim.send(INIT)
    wait_until(lambda: first.messages())
    first.crash()
    second = peers(sock_path)
    answer = shim.recv()
    assert answer["id"] == 1 and answer["result"]["method"] == "initialize"
    assert second.messages()[0]["id"] == 1  # the client's own request, not a replay
    shim.expect_silence(0.3)


def test_stateless_session_reconnects_without_replay(shims, peers, sock_path):
    first = peers(sock_path)
    shim = shims("--socket", sock_path, "--no-start")
    shim.send(req("d1", "server/discover"))
    assert shim.recv()["id"] == "d1"
    first.crash()
    second = peers(sock_path)
    wait_until(lambda: len(second.hellos) == 1, what="the reconnect")
    shim.send(req("c1", "tools/call", echo="q"))
    assert shim.recv()["result"]["echo"] == "q"
    assert [m.get("method") for m in second.messages()] == ["tools/call"]


def test_lost_daemon_then_eof_answers_held_requests_with_what_to_run(shims, peers, sock_path):
    first = peers(sock_path)
    shim = shims("--socket", sock_path, "--no-start")
    handshake(shim, first)
    first.crash()
    time.sleep(0.1)
    shim.send(req(6))
    eof_at = shim.close_stdin()
    answer = shim.recv()
    assert answer["id"] == 6 and "memoryd serve" in answer["error"]["message"]
    assert shim.wait() == 1
    assert time.monotonic() - eof_at < 1.0


# ---- starting the daemon, with a stand-in "memoryd" package ------------------------------------------------

STANDIN = '''
"""Test-only stand-in for `python -m memoryd serve` (NOT memoryd): records how it was started, then
answers hellos and echoes requests like the EchoPeer. Exits by itself after 60 s so nothing is left behind."""
import json, os, socket, sys, threading, time
record_dir = os.environ["STANDIN_RECORD_DIR"]
if os.environ.get("STANDIN_EXIT"):
    sys.stderr.write("stand-in daemon: failing on purpose\\n")
    sys.exit(int(os.environ["STANDIN_EXIT"]))
args = sys.argv[1:]
path = args[args.index("--socket") + 1]
info = {"argv": [sys.executable] + sys.argv, "orig_argv": sys.orig_argv, "pid": os.getpid(),
        "sid": os.getsid(0), "pgid": os.getpgid(0), "cwd": os.getcwd(),
        "stdin": os.readlink("/proc/self/fd/0"), "stdout": os.readlink("/proc/self/fd/1")}
with open(os.path.join(record_dir, f"{os.getpid()}.json"), "w") as f:
    json.dump(info, f)
time.sleep(float(os.environ.get("STANDIN_DELAY", "0")))
srv = socket.socket(socket.AF_UNIX)
srv.bind(path)
srv.listen(16)
def serve(conn):
    f = conn.makefile("rb")
    f.readline()
    conn.sendall(b'{"memoryd":"ready","v":1,"version":"stand-in"}\\n')
    for line in f:
        msg = json.loads(line)
        if "id" in msg and "method" in msg:
            conn.sendall(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {"pid": os.getpid()}}).encode() + b"\\n")
threading.Timer(60, lambda: os._exit(0)).start()
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
'''


@pytest.fixture
def standin(short_dir):
    """A PYTHONPATH dir whose ``memoryd`` package is the stand-in; kills every stand-in at teardown."""
    pkg = os.path.join(short_dir, "standin", "memoryd")
    os.makedirs(pkg)
    open(os.path.join(pkg, "__init__.py"), "w").close()
    with open(os.path.join(pkg, "__main__.py"), "w") as f:
        f.write(STANDIN)
    records = os.path.join(short_dir, "records")
    os.makedirs(records)

    class Standin:
        record_dir = records

        @staticmethod
        def env(**extra) -> dict:
            return dict(os.environ, PYTHONPATH=os.path.dirname(pkg), STANDIN_RECORD_DIR=records, **extra)

        @staticmethod
        def started() -> list[dict]:
            return [json.loads(Path(records, n).read_text()) for n in sorted(os.listdir(records))]

    yield Standin
    for info in Standin.started():
        kill_session(info["pid"])


def test_starts_a_detached_daemon_with_its_own_interpreter(shims, standin, sock_path):
    shim = shims("--socket", sock_path, env=standin.env(STANDIN_DELAY="0.3"))
    shim.send(INIT)
    answer = shim.recv(timeout=15)
    assert answer["id"] == 1
    [info] = standin.started()
    assert answer["result"]["pid"] == info["pid"]
    assert info["orig_argv"][0] == sys.executable and os.path.isabs(info["orig_argv"][0])
    assert info["orig_argv"][1:] == ["-m", "memoryd", "serve", "--socket", sock_path]
    assert info["sid"] == info["pid"] and info["pgid"] == info["pid"]  # its own session and group
    assert info["sid"] != os.getsid(shim.proc.pid)
    assert info["cwd"] == "/"
    assert info["stdin"] == "/dev/null" and info["stdout"] == "/dev/null"
    assert b"started one" in shim.stderr
    shim.close_stdin()
    assert shim.wait() == 0
    os.kill(info["pid"], 0)  # the daemon outlives the shim


def test_five_shims_at_once_start_exactly_one_daemon(shims, standin, sock_path):
    env = standin.env(STANDIN_DELAY="0.5")  # a slow start widens the race
    group = [shims("--socket", sock_path, env=env) for _ in range(5)]
    for n, shim in enumerate(group):
        shim.send(req(n))
    pids = {shim.recv(timeout=15)["result"]["pid"] for shim in group}
    assert len(pids) == 1
    assert len(standin.started()) == 1


def test_a_daemon_that_dies_at_start_is_reported_with_its_log(shims, standin, sock_path, isolated_home):
    shim = shims("--socket", sock_path, env=standin.env(STANDIN_EXIT="3"))
    shim.send(req(1))
    answer = shim.recv(timeout=15)
    log_path = rendezvous.spawn_log_path_str()
    assert "exited with status 3" in answer["error"]["message"] and log_path in answer["error"]["message"]
    assert "failing on purpose" in Path(log_path).read_text()
    shim.close_stdin()
    assert shim.wait() == 1
