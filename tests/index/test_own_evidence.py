"""Ranking by a record's own evidence, on small real boards (real model, real LanceDB): a brief is not
ranked above briefs that match on their own by words only its task's title holds; an error code typed
alone finds the record holding it; a lone CJK character or emoji finds the record holding it."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.index.search import search
from memoryd.index.searcher import SearchQuery
from support.board import write_brief, write_task
from support.briefs import index_briefs

LOGIN_TASK = "t-20260101-aaaaaa"
#: (brief, task, title, what was said); the login task's briefs never say "login" themselves
LOGIN_BOARD = [
    ("b-20260101-000001", LOGIN_TASK, "Regression test", "add a regression test for the redirect loop"),
    (
        "b-20260101-000002",
        LOGIN_TASK,
        "Session cookie",
        "the session cookie is dropped so we land on the start page",
    ),
    ("b-20260101-000003", LOGIN_TASK, "Bump cookie lib", "bump the cookie library to the latest version"),
    (
        "b-20260102-000004",
        "t-20260102-cccccc",
        "Button misaligned",
        "the login button on checkout is misaligned",
    ),
    (
        "b-20260103-000005",
        "t-20260103-dddddd",
        "Form overflow",
        "login form fields overflow on small screens",
    ),
    (
        "b-20260104-000006",
        "t-20260104-eeeeee",
        "Popup blocked",
        "login with google fails with a popup blocked error",
    ),
]
TASK_TITLES = {
    LOGIN_TASK: "Fix the login redirect",
    "t-20260102-cccccc": "Checkout page polish",
    "t-20260103-dddddd": "Mobile layout",
    "t-20260104-eeeeee": "Google sign-in",
}


def _board(root: Path, briefs: list[tuple[str, str, str, str]], titles: dict[str, str], screens=None) -> Path:
    (root / "tasks").mkdir(parents=True)
    (root / "briefs").mkdir()
    for task, title in titles.items():
        write_task(root, task, title=title)
    for brief, task, title, said in briefs:
        shown = (screens or {}).get(brief)
        write_brief(root, brief, task, said=said, prompt="", title=title, summary="", screens=shown)
    return root


@pytest.fixture(scope="module")
def login_store(tmp_path_factory, embedder):
    root = tmp_path_factory.mktemp("login")
    return index_briefs(_board(root / "board", LOGIN_BOARD, TASK_TITLES), root / "index", embedder)


def test_a_task_title_does_not_rank_its_briefs_above_briefs_that_match_on_their_own(login_store, embedder):
    hits = search(
        login_store, embedder, SearchQuery("login", project="shopfront", kind="brief", reasons=True)
    ).hits
    ids = [h.id for h in hits]
    own = {"b-20260102-000004", "b-20260103-000005", "b-20260104-000006"}
    assert set(ids[:3]) == own, [(h.id, round(h.score, 3)) for h in hits]
    # the login task's briefs are still found (the task is about login), below those, and say why
    inherited = [h for h in hits if h.task == LOGIN_TASK]
    assert len(inherited) == 3
    assert all(h.why is not None and "login" not in h.why.words for h in inherited)
    assert all("login" in h.why.words for h in hits[:3])


def test_a_task_title_still_lifts_a_brief_that_matches_on_its_own(login_store, embedder):
    """ "redirect loop" is the regression test's own words; the task's "login" adds to it."""
    hits = search(login_store, embedder, SearchQuery("login redirect loop", kind="brief")).hits
    assert hits[0].id == "b-20260101-000001", [(h.id, round(h.score, 3)) for h in hits]


def test_own_evidence_is_the_same_whether_noted_at_the_write_or_read_back_after_a_restart(tmp_path, embedder):
    """Records are noted from the tokens of their write (no text read at search time) and saved beside the
    table; a store opened again starts with them, or reads back what it lacks; all rank alike."""
    from memoryd.index.records import brief_record
    from memoryd.index.store import IndexStore
    from memoryd.kinds.briefs.reader import BoardReader

    board = _board(tmp_path / "board", LOGIN_BOARD, TASK_TITLES)
    store = index_briefs(board, tmp_path / "index", embedder)
    snap = BoardReader(board).load()
    records = [brief_record(b, snap.tasks.get(b.task)) for b in snap.briefs.values()]
    ids = [r.id for r in records]
    store.upsert(records, embedder.embed_passages([r.embed_text for r in records]), embedder.name)
    assert store.signatures.missing(ids) == []  # noted as written: a search reads no text back

    def ranked(s):
        return [h.id for h in search(s, embedder, SearchQuery("login", kind="brief")).hits]

    reopened = IndexStore(tmp_path / "index")  # saved at the compaction that followed the first write
    assert reopened.signatures.missing(ids) == []
    own = {"b-20260102-000004", "b-20260103-000005", "b-20260104-000006"}
    for ranking in (ranked(store), ranked(reopened)):  # the tail scores ties apart from the text index
        assert set(ranking[:3]) == own and set(ranking[3:6]) == {i for i in ids if i.startswith("b-20260101")}
    reopened.signatures.forget(ids)  # as after a crash before any save: read back when a search asks
    assert set(ranked(reopened)[:3]) == own and reopened.signatures.missing(ids[:3]) == []
    # a record changed since the save: its entry is not taken back
    records[0] = brief_record(snap.briefs[ids[0]], None)
    store.upsert(records[:1], embedder.embed_passages([records[0].embed_text]), embedder.name)
    assert IndexStore(tmp_path / "index").signatures.missing(ids) == ids[:1]


SCREEN = (
    "Shopfront Checkout Cart Account Orders Help. Your order summary items subtotal shipping taxes total "
    "delivery options standard express pickup gift wrap coupon code apply billing address. "
)
#: (title, what was said, the text of its one screen); the codes are on long screens only, and other briefs
#: speak of errors, SSL and denied access in words
CODE_BOARD = [
    (
        "Card payment fails",
        "the saved card payment does not go through",
        SCREEN * 3 + "Error code: E4012. Retry.",
    ),
    (
        "Staging TLS broken",
        "staging will not open in chrome",
        SCREEN + "No secure connection. ERR_SSL_PROTOCOL_ERROR",
    ),
    (
        "Installer fails",
        "the windows installer stops half way",
        SCREEN * 2 + "Error 0x80070005: Access is denied.",
    ),
    ("Error page copy", "rewrite the error page copy, the error codes confuse people", ""),
    (
        "SSL certificate renewal",
        "renew the ssl certificate before it expires; protocol error seen last year",
        "",
    ),
    ("Payment error banner", "show a clear error banner when a card payment fails with any error code", ""),
    ("Windows access denied", "access is denied when the updater writes to program files on windows", ""),
    ("猫の写真", "猫の写真がアップロードできない", ""),
    ("検索のテスト", "これは検索のテストです", ""),
    ("Hot deploys", "tag the hot fixes with 🔥 in the changelog", ""),
    ("Release notes", "write a short note for each release", ""),
]


def _code_brief(n: int) -> str:
    return f"b-20261201-{n:06x}"


@pytest.fixture(scope="module")
def code_store(tmp_path_factory, embedder):
    root = tmp_path_factory.mktemp("codes")
    briefs = [(_code_brief(n), f"t-20261201-{n:06x}", t, s) for n, (t, s, _) in enumerate(CODE_BOARD)]
    titles = {task: title for _, task, title, _ in briefs}
    screens = {_code_brief(n): {"1": text} for n, (_, _, text) in enumerate(CODE_BOARD) if text}
    return index_briefs(_board(root / "board", briefs, titles, screens), root / "index", embedder)


@pytest.mark.parametrize(
    ("query", "n"),
    [("E4012", 0), ("e4012", 0), ("ERR_SSL_PROTOCOL_ERROR", 1), ("0x80070005", 2), ("E4012 payment", 0)],
)
def test_an_error_code_typed_alone_finds_the_record_holding_it_first(code_store, embedder, query, n):
    hits = search(code_store, embedder, SearchQuery(query, kind="brief")).hits
    assert hits and hits[0].id == _code_brief(n), [(h.title, round(h.score, 3)) for h in hits]
    assert hits[0].score >= 0.5
    # what merely speaks of errors or holds the code's parts ("ssl", "error") comes after it, weaker
    assert all(h.score < hits[0].score for h in hits[1:])


def test_a_code_the_index_does_not_hold_is_searched_as_before(code_store, embedder):
    """An unknown code has no holder to put first: the hybrid answers as for any word (here by meaning alone,
    nothing holds the word)."""
    hits = search(code_store, embedder, SearchQuery("E9999", kind="brief", reasons=True)).hits
    assert all(h.why.keyword == 0.0 for h in hits)


@pytest.mark.parametrize(("query", "n"), [("猫", 7), ("検", 8), ("は", 8), ("🔥", 9)])
def test_one_cjk_character_or_emoji_finds_the_record_holding_it(code_store, embedder, query, n):
    """A CJK character is a word in Japanese and Chinese, and indexed in pairs; an emoji is a plausible tag."""
    for model in (embedder, None):
        hits = search(code_store, model, SearchQuery(query, kind="brief", reasons=True)).hits
        assert hits and hits[0].id == _code_brief(n), (model, [(h.title, round(h.score, 3)) for h in hits])
        assert hits[0].why.keyword > 0


@pytest.mark.parametrize("query", ["a", "the"])
def test_a_single_latin_letter_or_filler_word_finds_nothing(code_store, embedder, query):
    """One letter ("a" is in every English text) or one filler word alone asks for nothing in particular."""
    for model in (embedder, None):
        assert search(code_store, model, SearchQuery(query, kind="brief")).hits == []
