"""Japanese queries on a small board rank by what the query asks, not by one shared word, on the real model
and real LanceDB.

The reported case: ログインのリダイレクト ("the login's redirect") ranked a brief about the login button's
colour above one about a redirect loop after sign-in. Two things let the shared word win: the bigram ンの,
joining ログイン to its particle, also matched ボタンの ("the button's"); and a record holding a third of
the query's terms scored a full keyword match, level with the record holding the rest.
"""

from __future__ import annotations

import pytest

from memoryd.index.keyword import terms
from memoryd.index.records import brief_record, sync_records
from memoryd.index.search import search
from memoryd.index.searcher import SearchQuery
from memoryd.index.store import IndexStore
from memoryd.kinds.briefs.source import BoardReader
from support.briefs import write_briefs

QUERY = "ログインのリダイレクト"
REDIRECTS = [
    "サインイン後にリダイレクトがループする",  # "after sign-in the redirect loops"
    "ログイン後にリダイレクトが無限ループする",  # "after login the redirect loops forever"
]
BUTTONS = [
    "ログインボタンの色を変えて",  # "change the login button's colour"
    "ログインボタンの色を濃い青に変更してください",
    "ログインボタンの色がダサいので直して",
]


def test_no_bigram_joins_a_katakana_word_to_its_particle():
    assert terms(QUERY, query=True) == ["ログ", "グイ", "イン", "リダ", "ダイ", "イレ", "レク", "クト"]
    assert "ンの" not in terms("ログインボタンの色")
    assert terms("画面が開けない") == [
        "画面",
        "面が",
        "が開",
        "開け",
        "けな",
        "ない",
    ]  # no katakana: as before


@pytest.mark.parametrize("button", BUTTONS)
@pytest.mark.parametrize("redirect", REDIRECTS)
def test_the_redirect_brief_ranks_first(tmp_path, embedder, redirect, button):
    board = tmp_path / "board"
    write_briefs(board, [button, redirect])
    snap = BoardReader(board).load()
    store = IndexStore(tmp_path / "index")
    sync_records(
        store,
        [brief_record(b, snap.tasks.get(b.task)) for b in snap.briefs.values()],
        embedder,
        kinds=("brief",),
    )
    store.optimize(purge=True)
    for model in (embedder, None):  # hybrid, and keyword-only (the model not warm yet)
        hits = search(store, model, SearchQuery(QUERY)).hits
        assert hits and hits[0].title == redirect, [(h.title, round(h.score, 3)) for h in hits]
