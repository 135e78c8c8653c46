"""The page in real headless Chromium against the real daemon serving ``--http`` on a copy of the sample board.

One keyword-only daemon for the module (maintenance only through ``memoryd forget --now``). Words of our own
are planted before it starts (a note line, a screen's text, a secret), so they sit in the index's first data
file; memories are stored through the tools once it runs. ``MEMORYD_SCREENSHOTS=<folder>`` also writes
the README's screenshots there (``test_screenshots``).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from support.briefs import Shim
from support.privacy import forget_now, in_index
from support.sockets import RawConnection
from support.web import plant, start_daemon

NOTES, NOTES_TASK = "b-20260811-43a237", "t-20260811-f45ef4"
SCREENS, SCREENS_TASK = "b-20260803-52ea08", "t-20260803-1cf523"
NOTE_GONE, NOTE_KEPT = "quillfeather brambleton", "snickerwick"
SCREEN_WORD = "marrowvale"  # screen text: searchable, never shown
KEPT_SCREEN_WORD = "palisandrix"
# Fake credentials of the shapes the redactor knows; planted in what was said, the prompt and a note.
AWS_KEY = "AKIAZQ7XK3VBNM4WT2PL"
GH_TOKEN = "ghp_" + "Zq8Kf2Lm9Rt4Xw7Yb3Nc6Vd1Hj5Gs0Pe2Ua8"
SECRET_WORD = "grindlewhisk"  # a word beside the secret, to search for
DEV_QUERY = "q010"
MEMORY_WORD = "tumbleroot"
LIVE_WORD = "zanthorpe"


def prepare(board: Path) -> None:
    plant(
        board,
        {NOTES: f"- ask about the {NOTE_GONE} rollout\n- keep the {NOTE_KEPT} flag\n"},
        {
            (SCREENS, "1"): f"\nTooltip: the {SCREEN_WORD} toggle\n",
            (SCREENS, "2"): f"\nStatus: {KEPT_SCREEN_WORD}\n",
        },
    )
    brief = board / "briefs" / NOTES
    with (brief / "said.txt").open("a") as f:
        f.write(f"\nthe {SECRET_WORD} deploy key is {AWS_KEY}\n")
    with (brief / "prompt.md").open("a") as f:
        f.write(f"\nUse token {GH_TOKEN} for the {SECRET_WORD} mirror.\n")
    with (brief / "notes.md").open("a") as f:
        f.write(f"- {SECRET_WORD}: {GH_TOKEN}\n")


@pytest.fixture(scope="module")
def served(request, shared_board):
    daemon = start_daemon(request, shared_board, prepare)
    conn = RawConnection(daemon.socket, tools=["memories"])
    conn.initialize()
    ids = []
    for i, (content, tags) in enumerate(
        [
            (f"Deploys use blue-green with a {MEMORY_WORD} canary", ["deploy", "infra"]),
            ("Staging resets every Monday at 06:00 UTC", ["staging", "infra"]),
            ("Use pnpm, not npm, in the web repo", ["frontend", "tooling"]),
            ("Payments API retries are idempotent by request key", ["payments", "api"]),
            ("The reconciliation job runs nightly at 02:00", ["payments", "jobs"]),
            ("Login redirect loop came from a stale refresh cookie", ["auth", "frontend"]),
        ]
    ):
        answer = conn.call(
            "store_memory", {"content": content, "tags": tags, "importance": 3 + i % 5}, id=i + 1
        )
        ids.append(answer["result"]["structuredContent"]["result"]["id"])
    for n, (a, b, kind) in enumerate(
        [(0, 1, "depends_on"), (3, 4, "related_to"), (5, 2, "caused_by"), (0, 4, "related_to")]
    ):
        conn.call(
            "create_relationship", {"from_hash": ids[a], "to_hash": ids[b], "relation_type": kind}, id=100 + n
        )
    conn.sock.close()
    daemon.memory_ids = ids
    return daemon


@pytest.fixture
def page(browser, served):
    """A browser tab that has been handed the token (``/open?token=``) and holds the cookie."""
    context = browser.new_context()
    tab = context.new_page()
    response = tab.goto(f"{served.url}/open?token={served.token}")
    assert response is not None and response.status == 200, response and response.status
    tab.on("dialog", lambda d: d.accept())
    yield tab
    context.close()


def test_the_page_loads_with_the_token_and_not_without(browser, served):
    context = browser.new_context()
    try:
        tab = context.new_page()
        # A script's request gets the empty 401; the browser's page load gets the signed-out page.
        refused = context.request.get(f"{served.url}/")
        assert refused.status == 401 and refused.text() == ""
        for path in ("/", "/open?token=not-the-token"):  # the page, and a used or stale hand-over link
            answer = tab.goto(f"{served.url}{path}")
            assert answer.status == 401
            assert (
                tab.locator("body").inner_text().strip() == "Signed out: run memoryd open to open the page."
            )
        assert context.cookies() == []
        opened = tab.goto(f"{served.url}/open?token={served.token}")
        assert opened.status == 200 and tab.url == f"{served.url}/"
        assert tab.locator("h1").inner_text() == "Tasks"
        (cookie,) = context.cookies()
        assert cookie["name"] == "memoryd_token" and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert tab.locator("section.project").count() > 1
        # open tasks come first in each project
        statuses = tab.locator("section.project").first.locator("li.task .badge").all_inner_texts()
        assert statuses == sorted(statuses, key=lambda s: s != "open")
        tab.wait_for_selector("#live.on")  # the event stream connected with the cookie
    finally:
        context.close()


def _dev_query(shared_board: Path, qid: str) -> dict:
    for line in (shared_board.parent / "dev.jsonl").read_text().splitlines():
        q = json.loads(line)
        if q["id"] == qid:
            return q
    raise AssertionError(f"{qid} is not in dev.jsonl")


def test_search_finds_the_right_task_for_a_dev_query(page, served, shared_board):
    q = _dev_query(shared_board, DEV_QUERY)
    page.fill("#q", q["query"])
    page.press("#q", "Enter")
    page.wait_for_selector("li.result")
    first = page.locator("#r-briefs + ol li.result").first
    assert first.get_attribute("data-task") == q["task"]
    why = first.locator(".why").inner_text()
    assert "words:" in why and "keyword" in why and "freshness" in why, why
    assert first.locator(".why mark").count() >= 2
    first.locator("a").click()
    page.wait_for_url(re.compile(rf"/task/{q['task']}"))
    assert page.locator("article.brief").count() >= 1


def _everything(tab) -> str:
    """The serialised DOM plus every text and attribute value (what a person or a script could see)."""
    return tab.content() + tab.evaluate(
        """() => [...document.querySelectorAll('*')].map(e =>
            [e.innerText || '', e.value || '', ...[...e.attributes].map(a => a.value)].join('\\n')).join('\\n')"""
    )


def test_a_planted_secret_and_screen_text_appear_nowhere(page, served):
    views = [
        f"/task/{NOTES_TASK}",
        f"/search?q={SECRET_WORD}+deploy+key",
        f"/task/{SCREENS_TASK}",
        "/memories",
    ]
    for path in views:
        page.goto(served.url + path)
        raw = page.context.request.get(served.url + path).text()
        for text in (_everything(page), raw):
            for secret in (AWS_KEY, GH_TOKEN, GH_TOKEN[4:20], SCREEN_WORD, KEPT_SCREEN_WORD):
                assert secret.lower() not in text.lower(), f"{secret!r} shown on {path}"
    page.goto(served.url + f"/task/{NOTES_TASK}")
    brief = page.locator(f"article#{NOTES}")
    assert SECRET_WORD in brief.inner_text() and "[REDACTED" in brief.inner_text()
    page.goto(served.url + f"/search?q={SECRET_WORD}")
    assert page.locator(f"li.result a[href$='#{NOTES}']").count() == 1  # the brief is found, not its secret


def _no_result_for(tab, url: str, word: str, brief: str | None = None) -> bool:
    tab.goto(f"{url}/search?q={word}")
    if brief is None:
        return word not in tab.locator("main").inner_text().replace(f"Search: {word}", "")
    return tab.locator(f"li.result a[href$='#{brief}']").count() == 0


def test_a_delete_removes_the_item_from_the_page_the_board_search_and_the_index(page, served):
    board, index = served.board, served.index
    note_word, screen_word = NOTE_GONE.split()[0], SCREEN_WORD
    for word in (note_word, screen_word, MEMORY_WORD):
        assert in_index(index, word), f"{word} should be in the index bytes while it is live"
    assert not _no_result_for(page, served.url, note_word, NOTES)

    # a note line
    page.goto(f"{served.url}/task/{NOTES_TASK}")
    note = page.locator(f"article#{NOTES} li.note", has_text=note_word)
    note.locator("button").click()
    note.wait_for(state="detached")
    assert page.locator(f"article#{NOTES} li.note", has_text=NOTE_KEPT).count() == 1
    notes = (board / "briefs" / NOTES / "notes.md").read_text()
    assert note_word not in notes and NOTE_KEPT in notes
    assert _no_result_for(page, served.url, note_word, NOTES)

    # a screenshot (its .png, .txt and .json)
    page.goto(f"{served.url}/task/{SCREENS_TASK}")
    shot = page.locator(f"article#{SCREENS} figure.shot", has_text="Screenshot 1")
    shot.locator("img").scroll_into_view_if_needed()
    page.wait_for_function(
        "src => [...document.images].some(i => i.src.endsWith(src) && i.complete && i.naturalWidth > 0)",
        arg=f"/shot/{SCREENS}/1",
    )
    shot.locator("button").click()
    shot.wait_for(state="detached")
    screens = board / "briefs" / SCREENS / "screens"
    assert not any((screens / f"1{s}").exists() for s in (".png", ".txt", ".json"))
    assert (screens / "2.png").exists()
    assert _no_result_for(page, served.url, screen_word, SCREENS)
    assert page.context.request.get(f"{served.url}/shot/{SCREENS}/1").status == 404

    # a memory
    page.goto(f"{served.url}/memories")
    memory = page.locator("li.memory", has_text=MEMORY_WORD)
    memory_id = memory.get_attribute("id").removeprefix("m-")
    memory.locator("form.del button").click()
    memory.wait_for(state="detached")
    assert not (board / "memories" / f"{memory_id}.md").exists()
    assert _no_result_for(page, served.url, MEMORY_WORD)

    forget_now(served)
    for word in (note_word, screen_word, MEMORY_WORD):
        assert not in_index(index, word), f"{word} is still in the index bytes after forget --now"
    assert in_index(index, NOTE_KEPT) and in_index(index, KEPT_SCREEN_WORD)


def test_a_delete_without_the_page_token_is_refused(page, served):
    page.goto(f"{served.url}/memories")
    action = page.locator("li.memory form.del").first.get_attribute("action")
    answer = page.context.request.post(served.url + action, form={"csrf": "guess", "back": "/memories"})
    assert answer.status == 403
    assert page.locator("li.memory").count() == len(list((served.board / "memories").glob("*.md")))


def _brief_without_outcome(board: Path, skip: set[str]) -> tuple[str, str]:
    for folder in sorted((board / "briefs").iterdir()):
        if folder.name not in skip and not (folder / "outcome.md").exists():
            return folder.name, json.loads((folder / "brief.json").read_text())["task"]
    raise AssertionError("every brief has an outcome")


def test_a_saved_outcome_and_a_stored_memory_appear_without_a_reload(page, served):
    brief, task = _brief_without_outcome(served.board, {SCREENS, NOTES})
    page.goto(f"{served.url}/task/{task}")
    page.wait_for_selector("#live.on")
    page.evaluate("() => { window.notReloaded = true; }")
    assert LIVE_WORD not in page.locator(f"article#{brief}").inner_text()
    with Shim(served.socket, served.env) as shim:
        shim.initialize()
        shim.ok("save_outcome", brief_id=brief, did=[f"Wired the {LIVE_WORD} retry"], open=["Ask finance"])
    page.locator(f"article#{brief} .outcome", has_text=LIVE_WORD).wait_for(timeout=15_000)
    assert page.evaluate("() => window.notReloaded === true")

    page.goto(f"{served.url}/memories")
    page.wait_for_selector("#live.on")
    page.evaluate("() => { window.notReloaded = true; }")
    conn = RawConnection(served.socket, tools=["memories"])
    conn.initialize()
    conn.call("store_memory", {"content": f"The {LIVE_WORD} retry backs off for 30 s", "tags": ["live"]})
    conn.sock.close()
    page.locator("li.memory", has_text=LIVE_WORD).wait_for(timeout=15_000)
    assert page.evaluate("() => window.notReloaded === true")


def test_the_memories_graph_and_sessions(page, served):
    page.goto(f"{served.url}/memories")
    svg = page.locator("svg.graph")
    assert svg.locator("line.rel").count() >= 2  # two relations no other test deletes
    assert svg.locator("a.node").count() == len(list((served.board / "memories").glob("*.md")))
    assert page.locator("li.memory .tag", has_text="payments").count() == 2
    page.goto(f"{served.url}/sessions")
    assert page.locator("h1").inner_text() == "Sessions"


def test_readable_at_320_px_and_in_dark_mode(browser, served):
    context = browser.new_context(viewport={"width": 320, "height": 640}, color_scheme="dark")
    try:
        tab = context.new_page()
        tab.goto(f"{served.url}/open?token={served.token}")
        for path in ("/", f"/task/{SCREENS_TASK}", "/memories", "/search?q=redirect+loop"):
            tab.goto(served.url + path)
            width = tab.evaluate("() => document.documentElement.scrollWidth")
            assert width <= 320, f"{path} scrolls sideways at 320 px ({width} px)"
        background = tab.evaluate("() => getComputedStyle(document.body).backgroundColor")
        assert background == "rgb(21, 23, 26)", background
    finally:
        context.close()


@pytest.mark.skipif(
    not os.environ.get("MEMORYD_SCREENSHOTS"), reason="set MEMORYD_SCREENSHOTS=<folder> to write them"
)
def test_screenshots(browser, served, shared_board):
    out = Path(os.environ["MEMORYD_SCREENSHOTS"])
    out.mkdir(parents=True, exist_ok=True)
    q = _dev_query(shared_board, DEV_QUERY)
    shots = [
        ("tasks", "/", {}),
        ("task", f"/task/{SCREENS_TASK}", {}),
        ("search", f"/search?q={q['query']}", {}),
        ("memories", "/memories", {}),
        ("dark", f"/task/{NOTES_TASK}", {"color_scheme": "dark"}),
        ("narrow", "/", {"viewport": {"width": 320, "height": 720}, "color_scheme": "light"}),
    ]
    for name, path, options in shots:
        context = browser.new_context(**{"viewport": {"width": 1100, "height": 820}, **options})
        try:
            tab = context.new_page()
            tab.goto(f"{served.url}/open?token={served.token}")
            tab.goto(served.url + path)
            tab.wait_for_selector("#live.on")
            tab.screenshot(path=str(out / f"{name}.png"))
        finally:
            context.close()


def test_the_page_is_usable_from_the_keyboard_alone(page, served):
    """Tab from the top: the skip link first, then the sections and the search box; Enter searches, and a
    result's link opens its task with Enter — no mouse anywhere."""
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"  # the skip link moves focus to the content
    page.goto(f"{served.url}/")
    for _ in range(12):  # the skip link, the section links, then the search box
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "q":
            break
    else:
        raise AssertionError("the search box is not reachable with Tab")
    page.keyboard.type("safari login")
    page.keyboard.press("Enter")
    page.wait_for_selector("li.result")
    for _ in range(40):  # on to the first result's link
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.closest('li.result') !== null"):
            break
    else:
        raise AssertionError("no result link is reachable with Tab")
    task = page.evaluate("document.activeElement.closest('li.result').dataset.task")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(rf"/task/{task}"))
    visible_focus = page.evaluate(
        "(() => { const a = document.querySelector('a'); a.focus();"
        " const s = getComputedStyle(a); return s.outlineStyle !== 'none' || s.boxShadow !== 'none'; })()"
    )
    assert visible_focus  # a focused link shows where the keyboard is
