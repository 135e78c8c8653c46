"""Session files on a real board folder: append atomicity, torn and broken lines, ids, the gate."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from memoryd.board.gate import UnsafePath
from memoryd.kinds.sessions.files import (
    Interaction,
    InvalidSessionId,
    append_interaction,
    check_session_id,
    list_sessions,
    load_summary,
    read_log,
    read_summary,
    write_summary,
)
from memoryd.kinds.sessions.summarize import extractive


@pytest.fixture
def board(tmp_path: Path) -> Path:
    b = tmp_path / "board"
    b.mkdir()
    return b


def test_torn_last_line_is_skipped_and_the_next_append_stays_whole(board):
    a = Interaction.new("s1", "first prompt", "t", "first response")
    b = Interaction.new("s1", "second prompt", "", "second response")
    append_interaction(board, a)
    append_interaction(board, b)
    path = board / "sessions" / "s1.jsonl"
    with open(path, "ab") as fh:  # a crash mid-append: half a line, no newline
        fh.write(b'{"id":"mem_x","sessionId":"s1","timestamp":"2026-01-0')
    log = read_log(board, "s1")
    assert [i.id for i in log.interactions] == [a.id, b.id]
    assert len(log.skipped) == 1 and log.skipped[0][0] == 3 and "torn last line" in log.skipped[0][1]
    c = Interaction.new("s1", "third prompt", "", "third response")
    append_interaction(board, c)
    log = read_log(board, "s1")
    assert [i.id for i in log.interactions] == [a.id, b.id, c.id]
    assert [n for n, _ in log.skipped] == [3]  # the torn line stays skipped, now a whole broken line


def test_broken_lines_are_skipped_by_number_and_the_rest_loads(board):
    good = [Interaction.new("s2", f"p{n}", "", f"r{n}") for n in range(3)]
    lines = [json.dumps(i.to_json()).encode() for i in good]
    other = Interaction.new("other", "x", "", "y")
    data = b"\n".join(
        [
            lines[0],
            b"{not json",
            b"\xff\xfe broken utf-8",
            json.dumps(other.to_json()).encode(),  # belongs to another session
            lines[1],
            lines[1],  # duplicate id
            json.dumps({**good[2].to_json(), "prompt": 7}).encode(),  # wrong type
            b"",
            lines[2],
        ]
    )
    (board / "sessions").mkdir()
    (board / "sessions" / "s2.jsonl").write_bytes(data + b"\n")
    log = read_log(board, "s2")
    assert [i.id for i in log.interactions] == [good[0].id, good[1].id, good[2].id]
    assert [n for n, _ in log.skipped] == [2, 3, 4, 6, 7]


def test_concurrent_appends_never_interleave(board):
    def writer(w: int) -> None:
        for n in range(40):
            append_interaction(board, Interaction.new("busy", f"w{w} n{n} " + "x" * 3000, "", "ok"))

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log = read_log(board, "busy")
    assert len(log.interactions) == 240 and log.skipped == []


@pytest.mark.parametrize(
    "bad", ["", "../x", "a/b", ".hidden", "-lead", "x" * 129, "ａｂ", "a.b", "a\n", "a b", None, 7]
)
def test_session_ids_are_checked_before_any_file_access(board, bad):
    with pytest.raises(InvalidSessionId):
        check_session_id(bad)
    with pytest.raises(InvalidSessionId):
        read_log(board, bad)
    assert not (board / "sessions").exists()


def test_gate_refuses_symlinked_session_files(board, tmp_path):
    outside = tmp_path / "outside.jsonl"
    outside.write_text(json.dumps(Interaction.new("s3", "p", "", "r").to_json()) + "\n")
    (board / "sessions").mkdir()
    os.symlink(outside, board / "sessions" / "s3.jsonl")
    with pytest.raises(UnsafePath):
        read_log(board, "s3")
    with pytest.raises(UnsafePath):
        append_interaction(board, Interaction.new("s3", "p", "", "r"))
    assert outside.read_text().count("\n") == 1  # never written through the link


def test_summary_round_trip_and_broken_summary(board):
    items = [Interaction.new("s4", "Fix the login bug in auth.py", "", "fixed with a python patch")]
    append_interaction(board, items[0])
    s = extractive("s4", items)
    assert s.method == "extractive" and s.category == "bugfix" and s.memory_count == 1
    write_summary(board, s)
    assert read_summary(board, "s4") == s
    assert list_sessions(board) == ["s4"]
    (board / "sessions" / "s4.summary.json").write_text('{"sessionId": "s4", "title": ')
    assert read_summary(board, "s4") is None
    with pytest.raises(ValueError):
        load_summary(board, "s4")
    assert not [p.name for p in (board / "sessions").iterdir() if p.name.startswith(".")]  # no temp left
