"""An append to a session log derives the record of the new turn only (real board folder, real source).

Every ``add_memory`` makes the indexer re-read its session's log. Deriving the record of every turn again
(redaction, keyword terms) took seconds per append on a log of a few MiB, growing with the session, and every
other agent's search waited for it behind the indexer's read barrier (a 14 MiB log: searches took 8-15 s
and timed out). The records of turns already seen are kept: the same objects come back.
"""

from __future__ import annotations

from pathlib import Path

from memoryd.kinds.sessions.files import Interaction, append_interaction
from memoryd.kinds.sessions.source import SessionSource, log_origin


def turn(n: int, session: str = "long-session") -> Interaction:
    return Interaction.new(session, f"prompt {n} about the checkout flow", "thinking", f"response {n}")


def records_of(source: SessionSource, session: str = "long-session") -> list:
    batch = source.records_for([log_origin(session)])
    return [r for r in batch.records if r.kind == "interaction"]


def test_an_append_derives_only_the_new_turn(tmp_path: Path):
    board = tmp_path / "board"
    board.mkdir()
    for n in range(20):
        append_interaction(board, turn(n))
    source = SessionSource(board)
    before = records_of(source)
    append_interaction(board, turn(20))
    after = records_of(source)
    assert [r.id for r in after[:20]] == [r.id for r in before] and len(after) == 21
    assert all(a is b for a, b in zip(after[:20], before, strict=True))  # not derived again
    assert "21" not in after[20].text_main and "20" in after[20].text_main


def test_a_line_edited_by_hand_is_derived_again(tmp_path: Path):
    board = tmp_path / "board"
    board.mkdir()
    for n in range(3):
        append_interaction(board, turn(n))
    source = SessionSource(board)
    before = records_of(source)
    log = board / log_origin("long-session")
    log.write_text(log.read_text().replace("response 1", "response one, edited"))
    after = records_of(source)
    assert after[0] is before[0] and after[2] is before[2]
    assert after[1] is not before[1] and "edited" in after[1].text_main


def test_the_kept_records_are_bounded_by_their_characters(tmp_path: Path):
    board = tmp_path / "board"
    board.mkdir()
    for session in ("first", "second"):
        append_interaction(board, turn(0, session))
    source = SessionSource(board, turn_cache_chars=60)  # one of these turns is ~45 characters
    first = records_of(source, "first")
    records_of(source, "second")  # the least recently loaded session goes
    assert records_of(source, "first")[0] is not first[0]
