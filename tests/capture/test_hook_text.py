"""What a hook sends, spools and files, for text that must not go out as typed: nested ``<private>`` spans,
lone surrogates and bytes that are not UTF-8. Real hooks (``sh -c`` as the agents run them), a real daemon,
and for the wire itself a plain socket that records the line a hook sends."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading

import pytest

from memoryd.kinds.briefs.capture import clean_prompt
from memoryd_shim.textrules import strip_private
from support.daemon import PYTHON, short_tmpdir
from support.hooks import board_bytes, run_hook

NESTED = "please check <private>outer <private>inner</private> NESTEDSECRET42 </private> and the queue"


@pytest.fixture
def setup(hooked):
    daemon, home, commands, repo = hooked()
    return daemon, home, commands["claude-code"], repo


def prompt(repo, session, text):
    return {"session_id": session, "cwd": str(repo), "hook_event_name": "UserPromptSubmit", "prompt": text}


def said_texts(board):
    return sorted(p.read_text() for p in (board / "briefs").glob("*/said.txt"))


@pytest.mark.parametrize(
    ("typed", "kept"),
    [
        (NESTED, "please check and the queue"),
        ("a <PRIVATE>x</Private> b", "a b"),
        ("keep < private >hidden</ Private > this", "keep this"),
        ("stray </private> close stays", "stray close stays"),
        ("unclosed <private> hides <b>the rest", "unclosed"),
        ("line one\n<private>x</private>\nline two", "line one\n\nline two"),
        ("two  spaces  <private>x</private>  stay apart", "two  spaces  stay apart"),
        ("<private>a</private><private>b</private>c", "c"),
    ],
)
def test_private_spans_are_cut_with_nesting(typed, kept):
    assert strip_private(typed)[0] == kept
    assert clean_prompt(typed).text == kept.strip()  # the daemon cuts with the same rule


def test_nested_private_text_never_reaches_the_board(setup):
    daemon, home, cmd, repo = setup
    out = run_hook(cmd["UserPromptSubmit"], prompt(repo, "p-1", NESTED), home, repo)
    assert out.code == 0 and "save_outcome" in out.stdout, out.stderr
    assert said_texts(daemon.board) == ["please check and the queue\n"]
    assert b"NESTEDSECRET42" not in board_bytes(daemon.board)


class Recorder:
    """A socket that takes one connection, keeps the line it gets and closes without answering."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(1)
        self.line = b""
        self.thread = threading.Thread(target=self._take, daemon=True)
        self.thread.start()

    def _take(self):
        conn, _ = self.sock.accept()
        with conn, conn.makefile("rb") as reader:
            self.line = reader.readline()

    def close(self):
        self.thread.join(10)
        self.sock.close()


def test_the_hook_sends_no_private_text_and_spools_what_got_no_answer(tmp_path):
    root = short_tmpdir()
    try:
        recorder = Recorder(root / "r.sock")
        env = {"HOME": str(tmp_path), "MEMORYD_HOME": str(root / "home"), "PATH": "/usr/bin:/bin"}
        proc = subprocess.run(
            [PYTHON, "-m", "memoryd_shim.hooks", "claude-code", "UserPromptSubmit", "--socket", str(root / "r.sock")],
            input=json.dumps(prompt(tmp_path, "w-1", NESTED + " <private>my-home-address")).encode(),
            capture_output=True,
            env=env,
            timeout=30,
        )  # fmt: skip
        recorder.close()
        assert proc.returncode == 0 and proc.stdout == b""
        sent = json.loads(recorder.line)["request"]
        assert sent["prompt"] == "please check and the queue" and len(sent["rid"]) == 32
        for secret in (b"NESTEDSECRET42", b"inner", b"my-home-address", b"private>"):
            assert secret not in recorder.line
        # the connection closed without an answer: the request is spooled, with the same rid
        (spooled,) = (root / "home" / "state" / "capture-spool.jsonl").read_text().splitlines()
        assert json.loads(spooled) == sent
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_lone_surrogates_and_bad_bytes_are_kept_as_replacement_characters(setup):
    daemon, home, cmd, repo = setup
    out = run_hook(cmd["UserPromptSubmit"], prompt(repo, "u-1", "fix the \ud800 parser"), home, repo)
    assert out.code == 0 and "save_outcome" in out.stdout, out.stderr
    raw = (
        json.dumps(prompt(repo, "u-2", "PLACEHOLDER"))
        .encode()
        .replace(b"PLACEHOLDER", b"tidy the \xff lexer")
    )
    out = run_hook(cmd["UserPromptSubmit"], raw, home, repo)
    assert out.code == 0 and "save_outcome" in out.stdout, out.stderr
    assert said_texts(daemon.board) == ["fix the \ufffd parser\n", "tidy the \ufffd lexer\n"]


def test_the_daemon_takes_lone_surrogates_and_logs_what_it_refuses(setup):
    daemon, home, cmd, repo = setup
    request = {"event": "prompt", "agent": "claude-code", "session": "d-1", "cwd": str(repo)}
    for req in ({**request, "prompt": "mend the \udc80 tokenizer"}, {**request, "event": "bogus"}):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(30)
            sock.connect(str(daemon.socket))
            sock.sendall(json.dumps({"memoryd": "capture", "v": 1, "request": req}).encode() + b"\n")
            answer = json.loads(sock.makefile("rb").readline())
        assert ("capture" in answer) == (req["event"] == "prompt"), answer
    assert said_texts(daemon.board) == ["mend the \ufffd tokenizer\n"]
    (refused,) = daemon.events("capture_refused")
    assert refused["level"] == "warning" and "bogus" in refused["error"]


def test_with_no_daemon_a_lone_surrogate_is_spooled(setup):
    daemon, home, cmd, repo = setup
    daemon.kill()
    out = run_hook(cmd["UserPromptSubmit"], prompt(repo, "n-1", "fix the \ud800 parser"), home, repo)
    assert out.code == 0 and out.stderr == ""
    spool = daemon.root / "home" / "state" / "capture-spool.jsonl"
    assert json.loads(spool.read_text())["prompt"] == "fix the \ufffd parser"
