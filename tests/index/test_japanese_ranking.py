"""Japanese queries on a small board rank by what the query asks, not by one shared word, on the real model
and real LanceDB.

The reported case: ログインのリダイレクト ("the login's redirect") ranked a brief about the login button's
colour above one about a redirect loop after sign-in. Two things let the shared word win: the bigram ンの,
joining ログイン to its particle, also matched ボタンの ("the button's"); and a record holding a third of
the query's terms scored a full keyword match, level with the record holding the rest.

The same query also has to find a brief that spells the loanwords in English ("login 後に redirect"), and an
English query a brief that spells them in katakana: bigrams alone share nothing between the two spellings,
and the model alone ranked the button brief first, or nothing.
"""

from __future__ import annotations

import pytest

from memoryd.index.search import search
from memoryd.index.searcher import SearchQuery
from memoryd.index.terms import terms
from support.briefs import index_briefs, write_briefs

QUERY = "ログインのリダイレクト"
REDIRECTS = [
    "サインイン後にリダイレクトがループする",  # "after sign-in the redirect loops"
    "ログイン後にリダイレクトが無限ループする",  # "after login the redirect loops forever"
    "login 後に redirect loop が起きる",  # "after login a redirect loop happens"
]
BUTTONS = [
    "ログインボタンの色を変えて",  # "change the login button's colour"
    "ログインボタンの色を濃い青に変更してください",
    "ログインボタンの色がダサいので直して",
]


def test_no_bigram_joins_a_katakana_word_to_its_particle():
    assert "ンの" not in terms("ログインボタンの色") and "ンの" not in terms(QUERY, query=True)
    no_katakana = terms("画面が開けない")  # as before
    assert no_katakana == ["画面", "面が", "が開", "開け", "けな", "ない"]


def test_known_loanwords_also_give_their_english_words():
    # a record: once each; a query: once per bigram of the katakana, so either spelling weighs the same
    assert terms("ログインボタン") == ["ログ", "グイ", "イン", "ンボ", "ボタ", "タン", "login", "button"]
    asked = terms(QUERY, query=True)
    assert asked == [
        "ログ",
        "グイ",
        "イン",
        *["login"] * 3,
        "リダ",
        "ダイ",
        "イレ",
        "レク",
        "クト",
        *["redirect"] * 5,
    ]
    assert terms("ユーザ")[-1] == terms("ユーザー")[-1] == "user"  # with or without the long-vowel mark
    assert terms("コンテスト") == [
        "コン",
        "ンテ",
        "テス",
        "スト",
    ]  # holds テスト, but is not made of known words


@pytest.mark.parametrize("button", BUTTONS)
@pytest.mark.parametrize("redirect", REDIRECTS)
def test_the_redirect_brief_ranks_first(tmp_path, embedder, redirect, button):
    board = tmp_path / "board"
    write_briefs(board, [button, redirect])
    store = index_briefs(board, tmp_path / "index", embedder)
    for model in (embedder, None):  # hybrid, and keyword-only (the model not warm yet)
        # in English only where the brief says login too (サインイン is "sign-in")
        for query in (QUERY, "login redirect") if "サインイン" not in redirect else (QUERY,):
            hits = search(store, model, SearchQuery(query)).hits
            assert hits and hits[0].title == redirect, (query, [(h.title, round(h.score, 3)) for h in hits])
