"""The memory file format and its I/O (``memoryd.kinds.memories.files``), on real temporary boards."""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import unicodedata

import pytest

from memoryd.board.gate import InvalidId
from memoryd.kinds.briefs.source import BoardUnreadable
from memoryd.kinds.memories.files import (
    Memory,
    MemoryFileError,
    Relation,
    content_hash,
    delete_memory,
    list_memories,
    normalize_content,
    parse_memory,
    read_memory,
    render_memory,
    write_memory,
)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_normalisation_is_crlf_nfc_and_trailing_whitespace():
    nfd = unicodedata.normalize("NFD", "  café\r\nline  \r\n\t\n")
    assert normalize_content(nfd) == "  café\nline"
    assert content_hash(nfd) == sha("  café\nline")
    assert normalize_content("a\rb") == "a\rb"  # only Windows line ends are folded
    with pytest.raises(ValueError, match="surrogate"):
        normalize_content("half \ud800 pair")


def test_render_and_parse_round_trip_exactly(tmp_path):
    content = "\n\n  leading blank lines and indentation stay\n---\nnot front matter\n😀 日本語"
    m = Memory.new(
        content,
        tags=("deploy", "ci"),
        importance=7,
        memory_type="decision",
        project="shopfront",
        origin="import:memdb",
        relations=(Relation("a" * 32, "depends_on", "b" * 64, "2026-01-05T10:00:00Z"),),
    )
    assert m.id == sha(content) == m.hash
    assert parse_memory(render_memory(m), m.id) == m
    path, is_new = write_memory(tmp_path, m)
    assert is_new and path == tmp_path / "memories" / f"{m.id}.md"
    assert read_memory(tmp_path, m.id) == m
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_hand_written_variants_parse():
    text = (
        "---\r\ntags: deploy ci\r\nimportance: 3\r\ncreated_at: 2026-01-05T10:00:00Z\r\n"
        "my_own_key: kept\r\n---\r\nWindows line ends  \r\n"
    )
    m = parse_memory(text, "c" * 64)
    assert (m.content, m.tags, m.importance, m.memory_type) == (
        "Windows line ends",
        ("deploy", "ci"),
        3,
        "general",
    )
    assert m.created_at == m.accessed_at == "2026-01-05T10:00:00Z"
    assert m.extra == {"my_own_key": "kept"}
    assert "my_own_key: kept" in render_memory(m)
    assert m.hash == sha("Windows line ends") != m.id  # a hand edit: name and content disagree
    assert parse_memory("---\n---\nbare\n", "d" * 64).content == "bare"
    # the ISO-8601 forms other tools write are kept as written: a date, an offset, fractions, a space
    for when in ("2026-01-05", "'2026-01-05T10:00:00+02:00'", "'2026-01-05 10:00:00.123'"):
        m = parse_memory(f"---\ncreated_at: {when}\n---\nx\n", "d" * 64)
        assert m.created_at == when.strip("'") == m.accessed_at


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("no front matter\n", "no front matter"),
        ("---\ntags: [unclosed\n---\nx\n", "not valid YAML"),
        ("---\n- a list\n---\nx\n", "mapping"),
        ("---\nimportance: 11\n---\nx\n", "importance"),
        ("---\nimportance: true\n---\nx\n", "importance"),
        ("---\nimportance: .inf\n---\nx\n", "importance must be an integer 0-10"),
        ("---\nimportance: -.inf\n---\nx\n", "importance must be an integer 0-10"),
        ("---\nimportance: .nan\n---\nx\n", "importance must be an integer 0-10"),
        ("---\nimportance: 2.5\n---\nx\n", "importance must be an integer 0-10"),
        ("---\nmemory_type: rumour\n---\nx\n", "memory_type"),
        ("---\ntags: [two words]\n---\nx\n", "whitespace"),
        ("---\nrelations: [{id: x, type: t, target: y}]\n---\nx\n", "relations[0].id"),
        ("---\n---\n   \n", "empty content"),
        ("---\ncreated_at: 'not a date'\n---\nx\n", "created_at is not an ISO-8601 time"),
        ("---\ncreated_at: 2026.5\n---\nx\n", "created_at is not an ISO-8601 time"),
        ("---\naccessed_at: yesterday\n---\nx\n", "accessed_at is not an ISO-8601 time"),
        # valid YAML the loader cannot convert: a date that does not exist, a number past Python's digits
        ("---\ncreated_at: 2026-13-45\n---\nx\n", "a value YAML cannot convert"),
        ("---\ntags: [2026-02-30]\n---\nx\n", "a value YAML cannot convert"),
        ("---\ncreated_at: 2026-01-05T10:00:00+99:00\n---\nx\n", "a value YAML cannot convert"),
        (f"---\nimportance: {'9' * 5000}\n---\nx\n", "a value YAML cannot convert"),
        ("---\nnote: !!float abc\n---\nx\n", "a value YAML cannot convert"),
        (
            f"---\nrelations: [{{id: {'a' * 32}, type: t, target: {'b' * 64}, created_at: soon}}]\n---\nx\n",
            "relations[0].created_at is not an ISO-8601 time",
        ),
    ],
)
def test_broken_files_raise_a_reason(text, reason):
    with pytest.raises(MemoryFileError, match=reason.replace("[", r"\[").replace("]", r"\]")):
        parse_memory(text, "e" * 64)


def test_listing_skips_broken_and_foreign_files_never_the_board(tmp_path):
    good = Memory.new("good one", tags=("t",))
    write_memory(tmp_path, good)
    folder = tmp_path / "memories"
    (folder / ("f" * 64 + ".md")).write_text("---\nimportance: eleven\n---\nx\n")
    (folder / ("b" * 64 + ".md")).write_text("---\nimportance: .inf\n---\nx\n")  # once an OverflowError
    (folder / "notes.md").write_text("---\n---\nnot a hash name\n")
    (folder / ".hidden.md.tmp").write_text("temp")
    (folder / f"{'a' * 64}.md").symlink_to(folder / f"{good.id}.md")
    memories, skipped = list_memories(tmp_path)
    assert [m.id for m in memories] == [good.id]
    assert {s.path: s.reason for s in skipped} == {
        f"memories/{'a' * 64}.md": "symlink",
        f"memories/{'f' * 64}.md": "importance must be an integer 0-10",
        f"memories/{'b' * 64}.md": "importance must be an integer 0-10",
        "memories/notes.md": "name is not <sha256 hex>.md",
    }
    empty = tmp_path / "empty-board"
    empty.mkdir()
    assert list_memories(empty) == ([], [])
    with pytest.raises(BoardUnreadable):
        list_memories(tmp_path / "no-board-here")


def test_ids_are_checked_before_any_file_access(tmp_path):
    for bad in ("../" + "a" * 61, "A" * 64, "a" * 63, "a" * 64 + "\n", "ａ" * 64):
        with pytest.raises(InvalidId):
            read_memory(tmp_path, bad)
        with pytest.raises(InvalidId):
            delete_memory(tmp_path, bad)
    assert not (tmp_path / "memories").exists()


def test_exactly_one_of_many_concurrent_creators_is_new(tmp_path):
    m = Memory.new("written by twenty threads at once", tags=("race",))
    results: list[bool] = []
    barrier = threading.Barrier(20)

    def go() -> None:
        barrier.wait()
        results.append(write_memory(tmp_path, m)[1])

    threads = [threading.Thread(target=go) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] * 19 + [True]
    assert os.listdir(tmp_path / "memories") == [f"{m.id}.md"]  # no temp file left behind
    assert (tmp_path / "memories" / f"{m.id}.md").stat().st_nlink == 1


def test_create_never_replaces_and_overwrite_does(tmp_path):
    m = Memory.new("one memory", tags=("a",))
    write_memory(tmp_path, m)
    assert write_memory(tmp_path, m.with_(tags=("b",)))[1] is False
    assert read_memory(tmp_path, m.id).tags == ("a",)
    assert write_memory(tmp_path, m.with_(tags=("b",)), overwrite=True)[1] is False
    assert read_memory(tmp_path, m.id).tags == ("b",)
    assert delete_memory(tmp_path, m.id) is True and delete_memory(tmp_path, m.id) is False
    assert read_memory(tmp_path, m.id) is None


def test_memories_read_back_share_their_repeated_strings(tmp_path):
    """The daemon keeps every memory as read (its view): no per-memory dict, and the strings that repeat
    across memories (type, tags, project, a relation's type; accessed_at equal to created_at) are one
    object each, so 10,000 memories cost less; unknown keys still round-trip."""
    (tmp_path / "memories").mkdir()
    target = sha("c")
    made = [
        Memory.new(text, tags=("db", "ops"), memory_type="decision", project="shop", created_at=now)
        for text, now in (("a", "2026-12-02T10:00:00Z"), ("b", "2026-12-02T11:00:00Z"))
    ]
    made[1] = made[1].with_(relations=(Relation("1" * 32, "relates_to", target, made[1].created_at),))
    for m in made:
        write_memory(tmp_path, m)
    a, b = (read_memory(tmp_path, m.id) for m in made)
    assert (a, b) == tuple(made)
    assert not hasattr(a, "__dict__")
    assert a.memory_type is b.memory_type and a.project is b.project
    assert all(x is y for x, y in zip(a.tags, b.tags, strict=True))
    assert b.relations[0].type is sys.intern("relates_to")
    assert a.accessed_at is a.created_at
    assert a.extra is b.extra and dict(a.extra) == {}
    with_extra = parse_memory(render_memory(made[0]).replace("---\n", "---\nmine: 1\n", 1), made[0].id)
    assert dict(with_extra.extra) == {"mine": 1}
    assert "mine: 1" in render_memory(with_extra)


def test_a_one_line_memory_s_record_line_is_its_text():
    """The index's in-memory line column shares the view's string instead of holding a copy."""
    from memoryd.kinds.memories.records import memory_record

    one = Memory.new("the checkout flow retries the payment call twice")
    assert memory_record(one).line is one.content
    spaced = Memory.new("two  spaces\nand a second line")
    assert memory_record(spaced).line == "two spaces"
    long = Memory.new("word " * 100)
    assert len(memory_record(long).line) == 200 and memory_record(long).line.endswith("…")
