"""The wire contract in memoryd_shim: socket-path rule, hello/answer lines, JSON-RPC helpers, command line."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memoryd_shim import jsonrpc, options, rendezvous, wirejson
from memoryd_shim.framing import LineBuffer, TooLong

# ---- socket path (contract §2) -------------------------------------------------------------------------


def test_memoryd_socket_wins_over_everything():
    env = {"HOME": "/home/ann", "MEMORYD_HOME": "/srv/md", "MEMORYD_SOCKET": "~/x/m.sock"}
    assert rendezvous.socket_path_str(env) == os.path.expanduser("~/x/m.sock")


def test_memoryd_home_puts_socket_under_its_state_dir():
    env = {"HOME": "/home/ann", "MEMORYD_HOME": "/srv/md"}
    assert rendezvous.socket_path_str(env, "linux") == "/srv/md/state/memoryd.sock"
    assert rendezvous.socket_path_str(env, "darwin") == "/srv/md/state/memoryd.sock"


def test_default_from_home_alone_linux_and_macos():
    env = {"HOME": "/home/ann"}
    assert rendezvous.socket_path_str(env, "linux") == "/home/ann/.local/state/memoryd/memoryd.sock"
    assert (
        rendezvous.socket_path_str(env, "darwin")
        == "/home/ann/Library/Application Support/memoryd/memoryd.sock"
    )


def test_xdg_state_home_is_ignored_because_agents_do_not_pass_it():
    env = {"HOME": "/home/ann", "XDG_STATE_HOME": "/elsewhere"}
    assert rendezvous.socket_path_str(env, "linux") == "/home/ann/.local/state/memoryd/memoryd.sock"


def test_path_over_103_bytes_falls_back_to_a_socket_of_its_own_in_tmp_uid():
    home = "/home/" + "a" * 80  # + "/Library/Application Support/memoryd/memoryd.sock" > 103 bytes
    long = home + "/Library/Application Support/memoryd/memoryd.sock"
    key = hashlib.sha256(long.encode()).hexdigest()[:16]
    expected = f"/tmp/memoryd-{os.getuid()}/{key}.sock"
    assert rendezvous.socket_path_str({"HOME": home}, "darwin") == expected
    assert rendezvous.socket_path({"HOME": home}, "darwin") == Path(expected)
    assert rendezvous.fallback_socket_path_str(long) == expected and len(expected.encode()) <= 103
    assert os.path.dirname(expected) == rendezvous.fallback_dir_str()  # the 0700 directory checks apply


def test_each_environment_with_a_long_path_gets_its_own_fallback_socket():
    homes = ["/srv/" + "m" * 90 + "/one", "/srv/" + "m" * 90 + "/two"]
    paths = [rendezvous.socket_path_str({"MEMORYD_HOME": h}, "linux") for h in homes]
    assert paths[0] != paths[1]
    assert all(p.startswith(rendezvous.fallback_dir_str() + "/") for p in paths)
    # the same environment, asked again (a shim now, its daemon later), finds the same socket
    assert paths == [rendezvous.socket_path_str({"MEMORYD_HOME": h, "HOME": "/x"}, "linux") for h in homes]
    by_home = {rendezvous.socket_path_str({"HOME": "/u/" + "h" * 90 + n}, "linux") for n in "ab"}
    assert len(by_home) == 2 and not by_home & set(paths)


def test_path_of_exactly_103_bytes_is_kept():
    suffix = "/.local/state/memoryd/memoryd.sock"
    home = "/h" + "x" * (103 - len(suffix) - 2)
    path = rendezvous.socket_path_str({"HOME": home}, "linux")
    assert len(path.encode()) == 103 and path.startswith(home)


def test_length_counts_bytes_not_characters():
    suffix = "/.local/state/memoryd/memoryd.sock"
    home = "/" + "é" * 40  # 81 bytes, 41 characters
    assert len(home + suffix) < 103 < len((home + suffix).encode())
    assert rendezvous.socket_path_str({"HOME": home}, "linux") == rendezvous.fallback_socket_path_str(
        home + suffix
    )


def test_path_and_str_forms_agree():
    for env in ({"HOME": "/home/ann"}, {"MEMORYD_HOME": "/srv/md"}, {"HOME": "/h/" + "b" * 120}):
        for platform in ("linux", "darwin"):
            assert rendezvous.socket_path(env, platform) == Path(rendezvous.socket_path_str(env, platform))
            assert rendezvous.state_dir(env, platform) == Path(rendezvous.state_dir_str(env, platform))


def test_socket_dir_problem(tmp_path):
    good = tmp_path / "good"
    good.mkdir(mode=0o700)
    assert rendezvous.socket_dir_problem(str(good)) is None
    assert rendezvous.socket_dir_problem(str(tmp_path / "absent")) is None
    loose = tmp_path / "loose"
    loose.mkdir()
    loose.chmod(0o755)
    assert "0755" in rendezvous.socket_dir_problem(str(loose))
    link = tmp_path / "link"
    link.symlink_to(good)
    assert "not a directory" in rendezvous.socket_dir_problem(str(link))
    assert "owned by" in rendezvous.socket_dir_problem(str(good), uid=os.getuid() + 1)


def test_serve_argv_uses_the_given_interpreter():
    assert rendezvous.serve_argv("/opt/py/bin/python") == ["/opt/py/bin/python", "-m", "memoryd", "serve"]
    assert rendezvous.serve_argv("/py", "/tmp/s.sock")[-2:] == ["--socket", "/tmp/s.sock"]


# ---- hello and answer (contract §4) --------------------------------------------------------------------


def test_hello_round_trip():
    line = rendezvous.hello_line(["briefs", "memo"], "/w", 42, "9.9")
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    msg = rendezvous.parse_hello(line)
    assert msg["memoryd"] == "hello" and msg["v"] == 1 and msg["tools"] == ["briefs", "memo"]
    assert msg["cwd"] == "/w" and msg["pid"] == 42


def test_parse_answer():
    assert rendezvous.parse_answer(rendezvous.ready_line("1.2"))["version"] == "1.2"
    ready = rendezvous.parse_answer(rendezvous.ready_line("1.2", "/boards/b"))
    assert ready == {
        "memoryd": "ready",
        "v": 1,
        "version": "1.2",
        "board": "/boards/b",
    }  # contract §4 + board
    refused = rendezvous.parse_answer(rendezvous.error_line("too old"))
    assert refused == {"memoryd": "error", "message": "too old"}
    for bad in (b"nope\n", b"[]\n", b'{"memoryd":"hello","v":1}\n', b'{"memoryd":"ready","v":2}\n'):
        with pytest.raises(ValueError):
            rendezvous.parse_answer(bad)


def test_tool_groups():
    assert rendezvous.parse_tool_groups(None) == ["briefs"]
    assert rendezvous.parse_tool_groups("memo, briefs,memo") == ["memo", "briefs"]
    assert rendezvous.parse_tool_groups("all") == list(rendezvous.TOOL_GROUPS)
    with pytest.raises(ValueError, match="unknown tool group"):
        rendezvous.parse_tool_groups("briefs,nope")


# ---- JSON-RPC helpers -----------------------------------------------------------------------------------


def test_classify_kinds_and_type_preserving_keys():
    req = jsonrpc.classify(b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}\n')
    assert (req.kind, req.id, req.method) == (jsonrpc.REQUEST, 1, "tools/list")
    keys = {jsonrpc.classify(json.dumps({"id": i, "method": "m"}).encode()).key for i in (1, "1", 1.0, 0)}
    assert len(keys) == 4  # 1, "1", 1.0 and 0 are different ids
    note = jsonrpc.classify(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert note.kind == jsonrpc.NOTIFICATION and note.key is None
    resp = jsonrpc.classify(b'{"jsonrpc":"2.0","id":"a","result":{}}')
    assert resp.kind == jsonrpc.RESPONSE and resp.key == jsonrpc.id_key("a")
    assert jsonrpc.classify(b"{nope").kind == jsonrpc.INVALID
    assert jsonrpc.classify(b"\xff\xfe").kind == jsonrpc.INVALID
    assert jsonrpc.classify(b"[1,2]").kind == jsonrpc.OTHER
    assert jsonrpc.classify(b"null").kind == jsonrpc.OTHER


def test_error_line_shape():
    line = jsonrpc.error_line("x", -32000, "memoryd restarted; please retry")
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {
        "jsonrpc": "2.0",
        "id": "x",
        "error": {"code": -32000, "message": "memoryd restarted; please retry"},
    }


def test_with_id_replaces_only_the_id():
    line = b'{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"id":"inner","n":"\xc3\xa9"}}\n'
    out = json.loads(jsonrpc.with_id(line, "replay-1"))
    assert out["id"] == "replay-1" and out["params"] == {"id": "inner", "n": "é"}


def test_head_id_finds_only_the_top_level_id():
    assert jsonrpc.head_id(b'{"jsonrpc":"2.0","id":17,"method":"x","params":{"a":"' + b"x" * 100) == 17
    assert jsonrpc.head_id(b'  {"id" : "s-1", "params": {') == "s-1"
    # a nested "id" before the real one, in a member cut off by the head: unknown, so null
    assert jsonrpc.head_id(b'{"params":{"id":5,"text":"' + b"y" * 100) is None
    assert jsonrpc.head_id(b'{"params":{"id":5},"id":6,"more":"') == 6
    assert jsonrpc.head_id(b'{"id":true,') is None
    assert jsonrpc.head_id(b"garbage") is None
    assert jsonrpc.head_id(b"") is None


# ---- command line ---------------------------------------------------------------------------------------


def test_options_defaults_and_values(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMORYD_HOME", str(tmp_path))
    opts = options.parse([])
    assert opts.socket_path == str(tmp_path / "state" / "memoryd.sock")
    assert opts.socket_arg is None and opts.tools == ["briefs"] and opts.may_start
    opts = options.parse(["--socket=rel.sock", "--tools", "memo,sessions", "--no-start"])
    assert opts.socket_path == os.path.abspath("rel.sock") == opts.socket_arg
    assert opts.tools == ["memo", "sessions"] and not opts.may_start
    monkeypatch.setenv("MEMORYD_NO_START", "1")
    assert not options.parse([]).may_start


def test_options_errors():
    for argv in (["--tools", "bogus"], ["--socket"], ["--frobnicate"], ["--socket="]):
        with pytest.raises(options.UsageError):
            options.parse(argv)


# ---- wirejson: the json package's C core without the json package ----------------------------------------


def test_wirejson_matches_json():
    samples = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"a": [1, 2.5, None, True, False]}},
        {"é": '漢字😀\x01"\\', "big": 2**70, "neg": -0.0, "exp": 1e300, "nested": [[[{}]], []]},
        "plain",
        [],
        0,
    ]
    for value in samples:
        for ensure_ascii in (True, False):
            for seps in ((",", ":"), (", ", ": ")):
                expected = json.dumps(value, ensure_ascii=ensure_ascii, separators=seps)
                assert wirejson.dumps(value, ensure_ascii, seps) == expected
        text = json.dumps(value)
        assert wirejson.loads(text) == json.loads(text)
        assert wirejson.loads(b"  " + text.encode() + b"\n") == value
    assert wirejson.raw_decode('{"id": 5, "x"', 7) == (5, 8)


def test_wirejson_rejects_bad_input_without_json_imported():
    # In a fresh interpreter json.decoder is not loaded: the C scanner's error path must still raise
    # ValueError (CPython 3.11 needs json.decoder for that; wirejson imports it on demand).
    code = textwrap.dedent(
        """
        import sys
        from memoryd_shim import wirejson
        assert wirejson.loads(b'{"a": [1, "x"]}') == {"a": [1, "x"]} and wirejson.dumps({"a": 1}) == '{"a":1}'
        assert "json" not in sys.modules, "the fast path imported json"
        for bad in [b'"abc', b'{"a":', b'[1,]', b'{"a" 1}', b'"\\\\x"', b'{}}', b'', b'nul', b'\\xff']:
            try:
                wirejson.loads(bad)
            except ValueError:
                continue
            raise SystemExit(f"accepted {bad!r}")
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr


# ---- framing ----------------------------------------------------------------------------------------------


def test_line_buffer_splits_across_chunks():
    lb = LineBuffer(cap=100)
    assert lb.feed(b'{"a":') == []
    assert lb.feed(b'1}\n{"b":2}\n{"c"') == [b'{"a":1}\n', b'{"b":2}\n']
    assert lb.feed(b":3}\n") == [b'{"c":3}\n']
    assert lb.feed(b"tail") == [] and lb.finish() == [b"tail\n"] and len(lb) == 0


def test_line_buffer_cap_is_on_the_line_without_its_newline():
    lb = LineBuffer(cap=10, head_bytes=4)
    assert lb.feed(b"x" * 10 + b"\n") == [b"x" * 10 + b"\n"]
    [too_long] = lb.feed(b"y" * 11 + b"\nok\n")[:1]
    assert isinstance(too_long, TooLong) and too_long.length == 11 and too_long.head == b"yyyy"


def test_line_buffer_skips_an_over_long_line_without_keeping_it():
    lb = LineBuffer(cap=10, head_bytes=4)
    assert lb.feed(b'{"id":7' + b"z" * 20) == []  # past the cap: only the head is kept
    assert len(lb) == 0
    assert lb.feed(b"z" * 1000) == []
    out = lb.feed(b'z"}\nnext\n')
    assert isinstance(out[0], TooLong) and out[0].length == 7 + 20 + 1000 + 3 and out[0].head == b'{"id'
    assert out[1:] == [b"next\n"]
    assert lb.feed(b"q" * 50) == [] and isinstance(lb.finish()[0], TooLong)
