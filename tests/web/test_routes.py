"""The page's routes on a plain Starlette app and a real in-process engine (no listener, no browser):
refusals, the gate in front of screenshots, the note-line edit, the partial answer of the live refresh."""

from __future__ import annotations

import json
import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import httpx2
import pytest
from starlette.applications import Starlette

from memoryd.core.engine import open_engine
from memoryd.core.warmup import EngineHandle
from memoryd.kinds.briefs.edits import EditRefused, delete_note, note_digest
from memoryd.settings import Settings
from memoryd.web import routes
from support.board import write_brief, write_task
from support.daemon import short_tmpdir

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 32


@pytest.fixture
def board():
    root = short_tmpdir()
    board = root / "board"
    (board / "tasks").mkdir(parents=True)
    task = write_task(board)
    brief = write_brief(board, said="the checkout page times out")
    yield root, board, task, brief
    shutil.rmtree(root, ignore_errors=True)


def serve(root: Path, board: Path, check) -> None:
    async def main() -> None:
        env = {**os.environ, "MEMORYD_HOME": str(root / "home")}
        settings = Settings.load(
            board=str(board), index=str(root / "index"), socket=str(root / "s.sock"), model="none", env=env
        )
        handle = EngineHandle()
        handle.start(lambda: open_engine(settings))
        assert await handle.loaded() == "ready", handle.error
        app = Starlette(routes=routes(handle))
        try:
            async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://t") as c:
                await check(c)
        finally:
            await handle.close(5)

    # A thread of its own: Playwright's sync API keeps an event loop running in this one (the session's
    # browser fixture), and anyio.run refuses to nest.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(anyio.run, main).result()


def test_deletes_need_the_page_token_and_a_same_origin_fetch(board):
    root, b, task, brief = board
    (brief / "notes.md").write_text("- keep this\n")

    async def check(c):
        page = (await c.get(f"/task/{task.stem}")).text
        token = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
        action = re.search(r'<form class="del" method="post" action="([^"]+)"', page).group(1)
        assert (await c.post(action, data={"csrf": "guess"})).status_code == 403
        cross = await c.post(action, data={"csrf": token}, headers={"Sec-Fetch-Site": "cross-site"})
        assert cross.status_code == 403
        assert (brief / "notes.md").read_text() == "- keep this\n"
        done = await c.post(action, data={"csrf": token, "back": "//evil.example/"})
        assert done.status_code == 303 and done.headers["location"] == "/"
        assert (brief / "notes.md").read_text() == ""

    serve(root, b, check)


def test_screenshots_are_served_only_through_the_gate(board, tmp_path):
    root, b, task, brief = board
    screens = brief / "screens"
    screens.mkdir()
    (screens / "1.png").write_bytes(PNG)
    outside = tmp_path / "secret.png"
    outside.write_bytes(PNG + b"outside")
    (screens / "2.png").symlink_to(outside)

    async def check(c):
        got = await c.get(f"/shot/{brief.name}/1")
        assert got.status_code == 200 and got.content == PNG and got.headers["content-type"] == "image/png"
        for bad in ("2", "..%2F..%2Fx", "3", "a.b"):
            assert (await c.get(f"/shot/{brief.name}/{bad}")).status_code == 404, bad
        assert (await c.get("/shot/b-../1")).status_code == 404
        page = (await c.get(f"/task/{task.stem}", headers={"X-Memoryd-Partial": "1"})).text
        assert page.startswith("<p>") and "<html" not in page  # only <main>'s contents
        assert f"/shot/{brief.name}/1" in page and f"/shot/{brief.name}/2" not in page

    serve(root, b, check)


def test_the_search_page_lists_the_brief_its_words_find_and_not_for_other_words(board):
    root, b, _, brief = board

    async def check(c):
        found = await c.get("/search", params={"q": "checkout page times out"})
        assert found.status_code == 200 and f"#{brief.name}'" in found.text.replace('"', "'")
        other = await c.get("/search", params={"q": "quarterly tax invoice"})
        assert other.status_code == 200 and brief.name not in other.text

    serve(root, b, check)


def test_a_note_line_is_removed_alone_and_a_stale_digest_removes_nothing(board):
    _, b, _, brief = board
    text = "intro line\n\n- first note\n* second note\n  third note  \n"
    (brief / "notes.md").write_text(text)
    delete_note(b, brief.name, 2, note_digest("second note"))
    assert (brief / "notes.md").read_text() == "intro line\n\n- first note\n  third note  \n"
    with pytest.raises(Exception, match="no such note"):
        delete_note(b, brief.name, 2, note_digest("second note"))
    assert (brief / "notes.md").read_text() == "intro line\n\n- first note\n  third note  \n"


def test_a_note_whose_secret_spans_lines_is_refused_not_guessed(board):
    _, b, _, brief = board
    key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7xQ\n-----END RSA PRIVATE KEY-----"
    (brief / "notes.md").write_text(f"- keep\n{key}\n")
    from memoryd.kinds.briefs.reader import BoardReader

    notes = BoardReader(b).read_brief(brief.name).notes
    shown = next(i for i, n in enumerate(notes) if "REDACTED" in n)
    with pytest.raises(EditRefused):
        delete_note(b, brief.name, shown, note_digest(notes[shown]))
    assert key in (brief / "notes.md").read_text()


def test_a_memory_s_relevance_is_shown_on_the_0_to_1_scale(board):
    """Importance and recency lift a strong match's relevance a little above 1; the page shows at most 1.00."""
    from datetime import UTC, datetime

    from memoryd.kinds.memories.files import Memory, write_memory
    from memoryd.kinds.memories.format import content_hash

    root, b, _, _ = board
    content = "the checkout page times out"
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    write_memory(b, Memory(content_hash(content), content, ("web",), 10, "decision", now, now, "shop"))

    async def check(c):
        page = (await c.get("/search", params={"q": content})).text
        shown = [float(x) for x in re.findall(r"relevance (\d+\.\d\d)", page)]
        assert shown and max(shown) <= 1.0, page

    serve(root, b, check)


def test_a_task_without_a_project_reads_no_project_on_the_page(board):
    root, b, task, brief = board
    for path in (task, brief / "brief.json"):
        path.write_text(json.dumps({**json.loads(path.read_text()), "project": ""}), encoding="utf-8")

    async def check(c):
        listed = (await c.get("/")).text
        assert re.search(r"<h2 id=\"p-\">\(no project\) <span", listed), listed
        one = (await c.get(f"/task/{task.stem}")).text
        assert "</span> (no project) · created" in one, one
        found = (await c.get("/search", params={"q": "checkout button does nothing"})).text
        assert "<span class=meta>(no project) · open ·" in found, found

    serve(root, b, check)
