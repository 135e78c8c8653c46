"""Helpers for the privacy tests: every byte of the index folder, ``memoryd forget --now``, and
words that occur in exactly one place on a board.

Index text columns are stored uncompressed (``memoryd.index.store``), so a word that is in the index is
in its bytes; each test also shows that for a live word before it shows that a forgotten one is gone
(a byte search that could not see anything would prove nothing).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from support.daemon import REPO, DaemonProcess

MEMORYD = REPO / ".venv" / "bin" / "memoryd"
TEXT_SUFFIXES = (".txt", ".md", ".json")


def index_bytes(index: Path) -> bytes:
    """Every byte of every file under ``index`` (symlinks not followed), concatenated and lower-cased.

    A file the daemon removes while this reads (a temp file of a write in progress) is skipped."""
    chunks = []
    for root, _dirs, files in os.walk(index):
        for name in sorted(files):
            path = Path(root, name)
            try:
                if path.is_file() and not path.is_symlink():
                    chunks.append(path.read_bytes())
            except FileNotFoundError:
                continue
    return b"\n".join(chunks).lower()


def files_containing(index: Path, needle: str) -> list[str]:
    """Index-relative paths of the files whose (lower-cased) bytes contain ``needle`` (for messages)."""
    out = []
    low = needle.lower().encode()
    for root, _dirs, files in os.walk(index):
        for name in files:
            path = Path(root, name)
            try:
                if low in path.read_bytes().lower():
                    out.append(str(path.relative_to(index)))
            except FileNotFoundError:
                continue
    return out


def in_index(index: Path, word: str) -> bool:
    return word.lower().encode() in index_bytes(index)


def run_memoryd(env: dict[str, str], *argv: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(MEMORYD), *argv], capture_output=True, text=True, env=env, timeout=timeout, cwd="/"
    )


def forget_now(daemon: DaemonProcess) -> dict[str, Any]:
    """``memoryd forget --now --json`` against ``daemon``; its report (must have gone through the daemon)."""
    done = run_memoryd(daemon.env, "forget", "--now", "--json", "--socket", str(daemon.socket))
    assert done.returncode == 0, f"forget failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    report = json.loads(done.stdout)
    assert report["via"] == "daemon", report
    return report


def board_text(board: Path, *, skip: tuple[Path, ...] = ()) -> str:
    """The lower-cased text of every .txt/.md/.json file on the board, except those under ``skip``."""
    parts = []
    for path in sorted(board.rglob("*")):
        if path.is_file() and path.suffix in TEXT_SUFFIXES and not any(path.is_relative_to(s) for s in skip):
            parts.append(path.read_text(errors="replace").lower())
    return "\n".join(parts)


def unique_words(text: str, elsewhere: str, min_len: int = 6) -> set[str]:
    """Lower-cased words of ``text`` (ASCII letters only, at least ``min_len`` long: the index keeps such a
    word verbatim, where CJK runs become bigrams) found nowhere in ``elsewhere``."""
    words = {w.lower() for w in re.findall(rf"(?<![A-Za-z])[A-Za-z]{{{min_len},}}(?![A-Za-z])", text)}
    return {w for w in words if w not in elsewhere}


def poll(check, what: str, timeout: float = 30.0, interval: float = 0.05) -> Any:
    """Call ``check`` until it returns something truthy; fail naming ``what`` after ``timeout`` seconds
    (a bound for correctness on a loaded machine, not a latency target)."""
    import time

    import pytest

    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout} s: {what}")
        time.sleep(interval)
