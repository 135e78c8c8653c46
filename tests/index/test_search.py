"""The search core on the real model and real LanceDB."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tests.conftest import need_shared

from memoryd.cli.eval.labelled import read_jsonl
from memoryd.index.columns import Filter
from memoryd.index.records import brief_record, sync_records
from memoryd.index.search import search
from memoryd.index.searcher import SearchQuery
from memoryd.index.store import IndexStore
from memoryd.index.terms import meaning_text, term_string
from memoryd.kinds.briefs.reader import BoardReader
from support.briefs import index_briefs

SYNTAX = [
    '"',
    "(",
    ")",
    "[",
    "{}",
    ":",
    "-",
    "+",
    "&",
    "||",
    "*",
    "~",
    "^2",
    "\\",
    "/",
    "'",
    "a:b",
    "title:login",
    '"unterminated',
    "login AND OR NOT",
    "+must -not",
    "https://example.com/a?b=c&d=e#f",
    "   ",
    "",
    "\t\n",
    "%2e%2e/",
    "NEAR(a b)",
    '{"json": true}',
    "SELECT * FROM records; --",
    "';DROP TABLE x;--",
    "\x00",
    "🙂",
    "ログイン",
    "a" * 5000,
]


@pytest.fixture(scope="module")
def board_copy(tmp_path_factory) -> Path:
    src = need_shared("eval", "board-v1", "board")
    dst = tmp_path_factory.mktemp("board") / "board"
    shutil.copytree(src, dst)
    return dst


@pytest.fixture(scope="module")
def indexed(board_copy, embedder, tmp_path_factory):
    index = tmp_path_factory.mktemp("index") / "index"
    return index_briefs(board_copy, index, embedder), index


@pytest.mark.parametrize("query", SYNTAX)
def test_query_syntax_is_never_parsed(indexed, embedder, query):
    store, _ = indexed
    for model in (embedder, None):
        result = search(store, model, SearchQuery(query))
        assert isinstance(result.hits, list)


def test_hinglish_request_words_are_neither_terms_nor_meaning():
    """A Hinglish request's words ("ka", "kaise", "kare") are dropped from its terms and from the text the model
    embeds; English words that are also Hinglish ones ("the", "main", "tab") stay in the embedded text."""
    assert term_string("login button ka colour kaise set kare", query=True) == "login button colour set"
    assert term_string("ye karein ya karo?", query=True) == ""
    assert meaning_text("login button ka colour kaise set kare") == "login button colour set"
    assert meaning_text("the main tab ka bug kab aaya") == "the main tab bug aaya"
    assert meaning_text("kya hai") == "kya hai"  # nothing else to embed


def test_empty_board_returns_nothing(tmp_path, embedder):
    (tmp_path / "board" / "tasks").mkdir(parents=True)
    (tmp_path / "board" / "briefs").mkdir()
    store = index_briefs(tmp_path / "board", tmp_path / "index", embedder)
    assert search(store, embedder, SearchQuery("login redirect loop")).hits == []


@pytest.mark.parametrize(
    ("query", "task"),
    [
        ("閲覧中のバージョンで検索結果をフィルタする対応", "t-20260921-c48c89"),
        ("画面の狭いスマホで入力中に送信ボタンが見えなくなる", "t-20260901-dc0f6e"),
        ("android aur iphone dono pe shop ke links app mein nahi khulte the", "t-20260827-0d1f14"),
        ("parallel partial refunds ne 50 ke charge pe 60 lauta diye, race condition", "t-20261008-31b21b"),
        ("refresh_token_reused", "t-20260803-1cf523"),
        ("the website login going round in circles", "t-20260803-1cf523"),
    ],
)
def test_multilingual_and_vague_queries_find_their_task(indexed, embedder, query, task):
    store, _ = indexed
    hits = search(store, embedder, SearchQuery(query)).hits
    assert hits and hits[0].task == task, [h.task for h in hits[:3]]
    assert set(hits[0].as_dict()) == {
        "id",
        "kind",
        "task",
        "project",
        "status",
        "date",
        "title",
        "line",
        "score",
    }


def test_meaning_hits_without_any_keyword_hit(indexed, embedder):
    store, _ = indexed
    # Japanese ("the refund was processed twice") sharing no keyword term with the English brief
    query = "返金が二重に処理された"
    keyword_ids = {i for i, _ in store.keyword(term_string(query, query=True), Filter(), 50)}
    hits = search(store, embedder, SearchQuery(query)).hits
    assert hits, "a confident meaning match must be returned even without keyword hits"
    assert hits[0].task == "t-20260805-fedb9e"
    assert hits[0].id not in keyword_ids
    assert set(hits[0].as_dict()) == {
        "id",
        "kind",
        "task",
        "project",
        "status",
        "date",
        "title",
        "line",
        "score",
    }
    assert search(store, None, SearchQuery(query)).mode == "keyword"


def _planted() -> tuple[list[dict], list[str]]:
    negatives = read_jsonl(need_shared("eval", "board-v1", "negatives.jsonl"))
    secrets = ["wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AKIAIOSFODNN7EXAMPLE"]
    return negatives, secrets


def test_negatives_find_nothing(indexed, embedder):
    store, _ = indexed
    negatives, _ = _planted()
    for q in negatives:
        assert search(store, embedder, SearchQuery(q["query"])).hits == [], q


def test_no_secret_or_removed_screen_in_stored_text_or_index_bytes(indexed, board_copy):
    store, index = indexed
    _, secrets = _planted()
    removed_words = ["thistlewood", "houseboat", "ferryman", "ysolde", "corvin", "marmalade"]
    table = store._table.to_arrow()
    for column in ("title", "line", "text_main", "text_aux"):
        blob = "\n".join(table.column(column).to_pylist()).lower()
        for s in secrets:
            assert s.lower() not in blob
            assert s.lower()[:12] not in blob
        for w in removed_words:
            assert w not in blob, (column, w)
    raw = b"".join(p.read_bytes() for p in index.rglob("*") if p.is_file()).lower()
    for needle in [*secrets, *removed_words]:
        assert needle.lower().encode() not in raw


def test_edit_reindexes_only_what_changed(board_copy, embedder, tmp_path):
    store = index_briefs(board_copy, tmp_path / "index", embedder)
    before = embedder.passages_embedded
    snap = BoardReader(board_copy).load()
    records = [brief_record(b, snap.tasks.get(b.task)) for b in snap.briefs.values()]
    report = sync_records(store, records, embedder, kinds=("brief",))
    assert (report.added, report.updated, report.embedded) == (0, 0, 0)
    assert embedder.passages_embedded == before

    brief_dir = board_copy / "briefs" / "b-20260803-52ea08"
    said = brief_dir / "said.txt"
    original = said.read_text()
    said.write_text(original + "\nalso the quokka mascot vanished from the header\n")
    try:
        snap = BoardReader(board_copy).load()
        records = [brief_record(b, snap.tasks.get(b.task)) for b in snap.briefs.values()]
        report = sync_records(store, records, embedder, kinds=("brief",))
        assert (report.updated, report.embedded) == (1, 1)
        assert embedder.passages_embedded == before + 1
        assert search(store, embedder, SearchQuery("quokka mascot")).hits[0].id == "b-20260803-52ea08"
    finally:
        said.write_text(original)


def test_deleted_index_folder_is_rebuilt(board_copy, embedder, tmp_path):
    index = tmp_path / "index"
    store = index_briefs(board_copy, index, embedder)
    assert store.count() == 200
    del store
    IndexStore.wipe(index)
    assert not index.exists()
    store = index_briefs(board_copy, index, embedder)
    assert store.count() == 200
    assert (
        search(store, embedder, SearchQuery("redirect loop login account")).hits[0].task
        == "t-20260803-1cf523"
    )


def test_deleted_brief_leaves_the_index(board_copy, embedder, tmp_path):
    board = tmp_path / "b"
    shutil.copytree(board_copy, board)
    store = index_briefs(board, tmp_path / "index", embedder)
    shutil.rmtree(board / "briefs" / "b-20260803-52ea08")
    snap = BoardReader(board).load()
    report = sync_records(
        store,
        [brief_record(b, snap.tasks.get(b.task)) for b in snap.briefs.values()],
        embedder,
        kinds=("brief",),
    )
    assert report.deleted == 1
    assert "b-20260803-52ea08" not in {
        h.id for h in search(store, embedder, SearchQuery("redirect loop", limit=50)).hits
    }
    assert json.dumps(store.rows(["b-20260803-52ea08"])) == "{}"
