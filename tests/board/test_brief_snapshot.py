"""The briefs source's snapshot keeps each brief without its prompt and its screens' text, while both stay
searchable and a brief's details still show the prompt: only the record and the details read them, from the
brief as read (real board, real LanceDB, keyword-only so no model is needed)."""

from __future__ import annotations

from pathlib import Path

from memoryd.core.indexer import Indexer
from memoryd.index.search import search
from memoryd.index.searcher import RWLock, SearchQuery
from memoryd.index.store import IndexStore
from memoryd.kinds.briefs.reader import BoardReader
from memoryd.kinds.briefs.source import BriefSource
from support.board import write_brief, write_task

BRIEF = "b-20260101-ccccc1"


def found(store: IndexStore, words: str) -> list[str]:
    return [h.id for h in search(store, None, SearchQuery(words)).hits]


def test_prompt_and_screen_text_are_searchable_but_not_kept_in_the_snapshot(tmp_path: Path):
    board = tmp_path / "board"
    (board / "tasks").mkdir(parents=True)
    (board / "briefs").mkdir()
    write_task(board)
    write_brief(
        board,
        BRIEF,
        prompt="## Ask\nWhy does the marmoset widget flicker?",
        screens={"1": "zanzibar invoice overlay", "2": ""},
    )
    source = BriefSource(board)
    store = IndexStore(tmp_path / "index")
    indexer = Indexer(store, lambda: None, RWLock(), sources=[source])
    indexer.full_sync()

    assert found(store, "zanzibar invoice") == [BRIEF]
    assert found(store, "marmoset widget") == [BRIEF]
    kept = source.snapshot.briefs[BRIEF]
    assert [(s.n, s.text, s.app, s.window_title) for s in kept.screens] == [
        ("1", "", "Chrome", "screen 1"),
        ("2", "", "Chrome", "screen 2"),
    ]
    assert len(kept.screen_pngs) == 2 and kept.said == "the checkout button does nothing"
    assert kept.prompt == "" and kept.title == "Checkout button"
    # a brief's details come from its files (engine.briefs.get_brief): the prompt is there
    assert "marmoset widget" in BoardReader(board).read_brief(BRIEF).prompt

    # an edit of one screen's text goes through records_for: the new text is searchable, the old is gone,
    # and the snapshot still keeps no text
    (board / "briefs" / BRIEF / "screens" / "1.txt").write_text("quokka receipt", encoding="utf-8")
    indexer._apply_batch("briefs", source.records_for([f"briefs/{BRIEF}/screens/1.txt"]), indexer.last_report)
    assert found(store, "quokka receipt") == [BRIEF]
    assert found(store, "zanzibar") == []
    assert all(s.text == "" for s in source.snapshot.briefs[BRIEF].screens)
    assert source.snapshot.briefs[BRIEF].prompt == "" and found(store, "marmoset") == [BRIEF]

    # a restart derives the record again from the files, with the screen's text
    again = IndexStore(tmp_path / "index2")
    Indexer(again, lambda: None, RWLock(), sources=[BriefSource(board)]).full_sync()
    assert found(again, "quokka receipt") == [BRIEF]
