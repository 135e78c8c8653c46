"""Planted links can't escape the board, through the real daemon and
the real shim: a brief file that is a symlink to a file outside the board, a hard link to such a file, a
symlinked brief folder, a symlinked ``outcome.md``, a FIFO named ``said.txt``.

Half are planted before the daemon starts (its start-up reconcile meets them), half while it runs (its
watcher and the tools meet them). Each outside file carries a word of its own: no answer, no search and no
byte of the index (after ``memoryd forget --now``) may hold one; nothing outside the board changes; the
daemon keeps answering; save_outcome replaces a symlinked ``outcome.md`` instead of writing through it and
refuses a symlinked brief folder.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from support.briefs import SHIM, Shim, board_files, copy_board, wait_engine_ready
from support.privacy import forget_now, index_bytes

pytestmark = pytest.mark.skipif(not SHIM.exists(), reason="no .venv/bin/memoryd-shim (run make setup)")

LINKED_FOLDER, LINKED_FOLDER_LATE = "b-20261201-aaaaaa", "b-20261201-bbbbbb"


def outside_brief(outside, brief_id: str, template, word: str):
    """A complete, valid brief folder outside the board (to be linked into ``briefs/``)."""
    folder = outside / brief_id
    folder.mkdir()
    meta = json.loads((template / "brief.json").read_text())
    meta.update(id=brief_id, title=f"Linked {word}", summary=f"Outside the board: {word}")
    (folder / "brief.json").write_text(json.dumps(meta))
    (folder / "said.txt").write_text(f"the {word} incident\n")
    return folder


def test_planted_links_are_never_followed_read_or_written_through(make_daemon, shared_board):
    daemon = make_daemon(env={"MEMORYD_OPTIMIZE_INTERVAL_S": "3600"})
    board = copy_board(shared_board, daemon.board)
    outside = daemon.root / "outside"  # same file system as the board, so a hard link is possible
    outside.mkdir()
    ids = sorted(p.name for p in (board / "briefs").iterdir())
    said_link, hard, outcome_link, fifo, said_link_late, fifo_late = ids[10:16]
    words = {
        "said": "zindleshaw",
        "hard": "gorvalith",
        "folder": "plimmerdusk",
        "outcome": "quendrasil",
        "said_late": "vantrelow",
        "folder_late": "horblintex",
    }
    briefs = board / "briefs"

    # --- planted before the daemon starts
    (outside / "said.txt").write_text(f"the {words['said']} secret\n")
    (briefs / said_link / "said.txt").unlink()
    (briefs / said_link / "said.txt").symlink_to(outside / "said.txt")
    (outside / "prompt.md").write_text(f"the {words['hard']} secret\n")
    (briefs / hard / "prompt.md").unlink()
    os.link(outside / "prompt.md", briefs / hard / "prompt.md")
    (briefs / LINKED_FOLDER).symlink_to(
        outside_brief(outside, LINKED_FOLDER, briefs / ids[0], words["folder"]), target_is_directory=True
    )
    (outside / "outcome.md").write_text(f"## Did\n- {words['outcome']}\n\n## Open\n- none\n")
    (briefs / outcome_link / "outcome.md").unlink(missing_ok=True)
    (briefs / outcome_link / "outcome.md").symlink_to(outside / "outcome.md")
    (briefs / fifo / "said.txt").unlink()
    os.mkfifo(briefs / fifo / "said.txt")

    daemon.start()
    wait_engine_ready(daemon)
    assert daemon.status()["engine"]["skipped_files"] >= 5

    # --- planted while it runs
    (outside / "said-late.txt").write_text(f"the {words['said_late']} secret\n")
    (briefs / said_link_late / "said.txt").unlink()
    (briefs / said_link_late / "said.txt").symlink_to(outside / "said-late.txt")
    (briefs / LINKED_FOLDER_LATE).symlink_to(
        outside_brief(outside, LINKED_FOLDER_LATE, briefs / ids[0], words["folder_late"]),
        target_is_directory=True,
    )
    (briefs / fifo_late / "prompt.md").unlink()
    os.mkfifo(briefs / fifo_late / "prompt.md")
    before = board_files(outside)

    with Shim(daemon.socket, daemon.env).initialize() as s:
        for word in words.values():
            assert s.ok("search_briefs", query=word, limit=50)["results"] == [], word
        assert s.ok("get_brief", brief_id=said_link)["said"] == ""
        assert s.ok("get_brief", brief_id=said_link_late)["said"] == ""
        assert s.ok("get_brief", brief_id=hard)["prompt"] == ""
        assert s.ok("get_brief", brief_id=outcome_link)["outcome"] is None
        assert s.ok("get_brief", brief_id=fifo)["said"] == ""  # answered: the FIFO never blocks a read
        assert s.ok("get_brief", brief_id=fifo_late)["prompt"] == ""
        for linked in (LINKED_FOLDER, LINKED_FOLDER_LATE):
            assert f"No brief {linked}" in s.failed("get_brief", brief_id=linked)
            refused = s.failed("save_outcome", brief_id=linked, did=["x"], open=[])
            assert "symlink" in refused or "No brief" in refused, refused
            assert not (outside / linked / "outcome.md").exists()
        listed = [t["task_id"] for t in s.ok("list_tasks", limit=100)["tasks"]]
        task = json.loads((briefs / ids[0] / "brief.json").read_text())["task"]
        assert task in listed
        shown = [b["brief_id"] for b in s.ok("get_task", task_id=task)["briefs"]]
        assert LINKED_FOLDER not in shown and LINKED_FOLDER_LATE not in shown

        # save_outcome replaces the symlinked outcome.md; the outside file is untouched.
        s.ok("save_outcome", brief_id=outcome_link, did=["Replaced the link"], open=["Nothing"])
        link = briefs / outcome_link / "outcome.md"
        assert not link.is_symlink() and link.read_text().startswith("## Did\n- Replaced the link\n")
        assert s.ok("get_brief", brief_id=outcome_link)["outcome"]["did"] == ["Replaced the link"]
        s.ok("save_outcome", brief_id=fifo, did=["Wrote beside a FIFO"], open=[])
        assert s.ok("search_briefs", query="idempotency key capture retry", limit=3)[
            "results"
        ]  # still serving
    output = s.output.decode()

    assert board_files(outside) == before  # nothing outside the board was written
    assert (outside / "outcome.md").read_text().startswith(f"## Did\n- {words['outcome']}")
    assert os.stat(outside / "prompt.md").st_nlink == 2  # the hard link itself is left alone
    report = forget_now(daemon)
    assert report["records"] == 200
    data = index_bytes(daemon.root / "index")
    assert b"idempotency" in data  # the byte search sees indexed words
    for word in words.values():
        assert word not in output, word
        assert word.encode() not in data, word
    assert daemon.status()["running"] is True
    shutil.rmtree(outside)
