"""The page's helpers: the real daemon serving ``--http`` on a temporary board, and where Chromium is.

The browser is Debian's ``chromium`` (``/usr/bin/chromium``, or ``MEMORYD_CHROMIUM``) driven by Playwright;
no browser is ever downloaded (``tests/web/conftest.py`` skips when it is missing).
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import time
from pathlib import Path

from support.briefs import copy_board, wait_engine_ready
from support.daemon import DaemonProcess, short_tmpdir

CHROMIUM = Path(os.environ.get("MEMORYD_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
HOUR = {"MEMORYD_OPTIMIZE_INTERVAL_S": "3600"}  # maintenance only when a test asks (forget --now)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HttpDaemon(DaemonProcess):
    """``memoryd serve --http PORT`` on a temporary board; :attr:`url` and :attr:`token` once started."""

    def __init__(self, root: Path, **kwargs) -> None:
        super().__init__(root, **kwargs)
        self.asked_port = free_port()
        self.url = ""
        self.token = ""

    @property
    def argv(self) -> list[str]:
        return [*super().argv, "--http", str(self.asked_port)]

    def start(self, timeout: float = 60.0) -> HttpDaemon:
        super().start(timeout)
        wait_engine_ready(self)
        deadline = time.monotonic() + 180
        while self.model != "none" and not self.events("model_ready"):
            assert time.monotonic() < deadline, f"the model did not load:\n{self.log()[-5000:]}"
            time.sleep(0.2)
        http = self.status()["http"]
        assert http and http["url"], f"no HTTP listener:\n{self.log()[-5000:]}"
        self.url = http["url"]
        self.token = (self.socket.parent / "http.token").read_text().strip()
        return self


def plant(board: Path, notes: dict[str, str], screen_text: dict[tuple[str, str], str]) -> None:
    """Add note lines and screen text to briefs of the board (before the daemon starts)."""
    for brief, lines in notes.items():
        with (board / "briefs" / brief / "notes.md").open("a") as f:
            f.write(lines)
    for (brief, n), text in screen_text.items():
        with (board / "briefs" / brief / "screens" / f"{n}.txt").open("a") as f:
            f.write(text)


def start_daemon(request, shared_board: Path, prepare) -> HttpDaemon:
    root = short_tmpdir()
    board = copy_board(shared_board, root / "board")
    prepare(board)
    # MEMORYD_WEB_MODEL="" serves with the default model (hybrid search, as in the README's screenshots),
    # built once under MEMORYD_TEST_MODELS; the tests use keyword-only search (quick).
    model = os.environ.get("MEMORYD_WEB_MODEL", "none")
    env = {
        **HOUR,
        **(
            {"MEMORYD_MODELS": os.environ["MEMORYD_TEST_MODELS"]}
            if os.environ.get("MEMORYD_TEST_MODELS")
            else {}
        ),
    }
    daemon = HttpDaemon(root, board=board, env=env, model=model)

    def stop() -> None:
        daemon.kill()
        mine = [i for i in request.session.items if i.module is request.module]
        if any(getattr(i, "rep_call", None) and i.rep_call.failed for i in mine):
            print(f"\n--- page daemon log ---\n{daemon.log()[-20000:]}", file=sys.stderr)
        shutil.rmtree(root, ignore_errors=True)

    request.addfinalizer(stop)
    return daemon.start()
