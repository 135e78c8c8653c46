"""Turning what a developer typed into board files: the text rules and the writes of a new brief or task.

Text rules (:func:`clean_prompt`), applied before anything touches the disk:

* ``<private>…</private>`` spans are cut out by :func:`memoryd_shim.textrules.strip_private`, the rule the
  hooks apply before sending (case-insensitive, nesting-aware, across lines; an unclosed ``<private>``
  hides everything after it), so that text is never stored anywhere;
* secrets are replaced by :func:`memoryd.index.redact.redact`'s placeholders, so ``said.txt`` and
  ``prompt.md`` never hold a key the rules know;
* what is left is **not a brief** when it is empty, only a slash command (``/clear``, ``/model opus``:
  one line starting with ``/word`` whose word holds no further ``/``), or a tool approval / menu answer
  (``y``, ``yes``, ``ok``, ``1``, ``approve`` …: see :data:`APPROVALS`).

Writes (:func:`write_task`, :func:`write_brief`) go through the board gate and
:mod:`memoryd.board.atomic`: a task file is created with ``link(2)`` (never replacing one), a brief folder is
created fresh, its text files written atomically, and ``brief.json`` last, so the brief exists for the
reader and the watcher only once it is whole.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from memoryd.board import atomic
from memoryd.board.gate import DEFAULT_MAX_BYTES, DIR_MODE, check_brief_id, check_task_id, open_folder
from memoryd.index.redact import redact
from memoryd.kinds.briefs.files import BriefHead
from memoryd.kinds.briefs.source import BRIEFS_DIR, TASKS_DIR
from memoryd_shim.textrules import strip_private

#: A prompt longer than this is cut (characters) before it is stored; agents paste whole logs.
MAX_PROMPT_CHARS = 100_000
TITLE_CHARS = 80
SUMMARY_CHARS = 240
_SLASH = re.compile(r"/[A-Za-z][\w:.-]*(?:\s[^\n]*)?", re.ASCII)
#: Whole prompts that answer a tool-approval question or a menu rather than ask for work.
APPROVALS = frozenset(
    [
        "y",
        "yes",
        "n",
        "no",
        "ok",
        "okay",
        "k",
        "sure",
        "yep",
        "yup",
        "nope",
        "nah",
        "1",
        "2",
        "3",
        "4",
        "approve",
        "approved",
        "allow",
        "deny",
        "reject",
        "accept",
        "proceed",
        "continue",
        "go",
        "lgtm",
        "✓",
        "👍",
        "はい",
        "いいえ",
        "haan",
        "ha",
        "nahi",
        "theek",
    ]
) | {"go ahead", "do it", "yes please", "ok go", "sounds good", "looks good", "ok do it", "theek hai"}


@dataclass(frozen=True)
class CleanPrompt:
    """A prompt ready to be stored: ``text`` (private spans cut, secrets redacted), or why it is not a brief.

    ``reason`` is ``""`` for a brief, else one of ``"empty"``, ``"slash-command"``, ``"approval"``.
    ``redactions`` counts the secrets replaced; ``private`` the ``<private>`` spans cut.
    """

    text: str
    reason: str = ""
    redactions: int = 0
    private: int = 0

    @property
    def is_brief(self) -> bool:
        return not self.reason


def clean_prompt(text: str) -> CleanPrompt:
    """Apply the module's text rules to what the developer typed (any ``str``; never raises)."""
    text, private = strip_private((text or "").replace("\r\n", "\n"))
    text = text[:MAX_PROMPT_CHARS]
    red = redact(text)
    body = red.text.strip()
    if not body:
        reason = "empty"
    elif "\n" not in body and _SLASH.fullmatch(body) and "/" not in body.split()[0][1:]:
        reason = "slash-command"
    elif " ".join(body.lower().strip(" .!").split()) in APPROVALS:
        reason = "approval"
    else:
        reason = ""
    return CleanPrompt(body, reason, red.total, private)


def title_of(text: str, limit: int = TITLE_CHARS) -> str:
    """A task or brief title from a prompt: its first non-blank line (Markdown marks dropped), cut at a word."""
    line = next((ln.strip(" #>*-\t") for ln in text.splitlines() if ln.strip(" #>*-\t")), "")
    line = " ".join(line.split())
    if len(line) <= limit:
        return line or "untitled"
    cut = line[: limit - 1].rsplit(" ", 1)[0]
    return (cut if len(cut) > limit // 2 else line[: limit - 1]) + "…"


def summary_of(text: str, limit: int = SUMMARY_CHARS) -> str:
    """One paragraph of the prompt, whitespace collapsed, cut at ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rsplit(" ", 1)[0] + "…"


#: What a screenshot must start with, and the largest one (bytes) or its text (characters) a brief takes.
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_SCREEN_BYTES = DEFAULT_MAX_BYTES  # the most the board's reader serves
MAX_SCREEN_TEXT_CHARS = MAX_PROMPT_CHARS


def read_screen(png: object, text: object = None) -> tuple[bytes, str | None]:
    """``(png bytes, text or None)`` of a screenshot a person attaches (``memoryd brief --screen``), read from
    the two paths. Only a regular PNG file of at most :data:`MAX_SCREEN_BYTES` and a UTF-8 text file are
    taken, so no other file of the user's can be copied onto the board. Raises ValueError saying why."""
    if not isinstance(png, str) or not png or (text is not None and not isinstance(text, str)):
        raise ValueError("a screen is [PNG path, text path or null]")
    if not os.path.isabs(png) or (text and not os.path.isabs(text)):
        raise ValueError("a screen's paths must be absolute")
    data = _read_regular(png, MAX_SCREEN_BYTES, "screenshot")
    if not data.startswith(PNG_SIGNATURE):
        raise ValueError(f"the screenshot {png} is not a PNG image")
    if not text:
        return data, None
    raw = _read_regular(text, MAX_SCREEN_TEXT_CHARS * 4, "screenshot's text")
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"the screenshot's text {text} is not UTF-8 text") from None
    return data, decoded[:MAX_SCREEN_TEXT_CHARS]


def _read_regular(path: str, limit: int, what: str) -> bytes:
    try:
        # O_NONBLOCK: opening a FIFO must not block a worker thread until a writer comes
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ValueError(f"cannot read the {what} {path}: {exc.strerror or exc}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise ValueError(f"the {what} {path} is not a regular file")
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    if info.st_size > limit or len(data) > limit:
        raise ValueError(f"the {what} {path} is larger than {limit:,} bytes")
    return data


def now_iso() -> str:
    """The current time as the board writes it: ISO-8601 UTC, seconds, ``Z``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_id(prefix: str, when: datetime | None = None) -> str:
    """A fresh ``t-``/``b-`` id for today (UTC): ``<prefix>-<yyyymmdd>-<6 hex>``."""
    day = (when or datetime.now(UTC)).strftime("%Y%m%d")
    return f"{prefix}-{day}-{secrets.token_hex(3)}"


def _json_bytes(value: dict) -> bytes:
    return (json.dumps(value, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def write_task(board: Path, task_id: str, title: str, project: str, created_at: str) -> Path:
    """Create ``tasks/<task_id>.json`` (status ``open``); returns its path.

    Raises InvalidId, FileExistsError (that id is taken), BoardUnreadable, UnsafePath, OSError.
    """
    check_task_id(task_id)
    data = _json_bytes(
        {"id": task_id, "title": title, "project": project, "status": "open", "created_at": created_at}
    )
    with open_folder(board, TASKS_DIR, create=True) as tasks:
        if not atomic.write_new(tasks, f"{task_id}.json", data):
            raise FileExistsError(f"task {task_id} exists")
        return Path(board) / tasks.relpath(f"{task_id}.json")


@dataclass(frozen=True)
class NewBrief(BriefHead):
    """What :func:`write_brief` writes. ``said``/``prompt`` are already cleaned; ``screens`` are
    ``(png bytes, text or None)`` pairs, numbered from 1. ``captured`` names the agent and session that
    sent it, and the ``rid`` of its hook request (an extra ``brief.json`` field; readers ignore what they do
    not know)."""

    said: str
    prompt: str
    screens: tuple[tuple[bytes, str | None], ...] = ()
    captured: dict | None = None


def write_brief(board: Path, brief: NewBrief) -> Path:
    """Create ``briefs/<id>/`` with ``said.txt``, ``prompt.md``, screens, then ``brief.json``; returns the folder.

    Raises InvalidId, FileExistsError (the folder exists), BoardUnreadable, UnsafePath, OSError.
    """
    check_brief_id(brief.id)
    check_task_id(brief.task)
    meta = {
        "id": brief.id,
        "task": brief.task,
        "project": brief.project,
        "created_at": brief.created_at,
        "title": brief.title,
        "summary": brief.summary,
    }
    if brief.captured:
        meta["captured"] = brief.captured
    with open_folder(board, BRIEFS_DIR, create=True) as briefs:
        os.mkdir(brief.id, DIR_MODE, dir_fd=briefs.fd)  # FileExistsError: never write into another brief
        with briefs.child(brief.id) as d:
            atomic.write_replace(d, "said.txt", brief.said.encode("utf-8") + b"\n")
            atomic.write_replace(d, "prompt.md", brief.prompt.encode("utf-8") + b"\n")
            if brief.screens:
                os.mkdir("screens", DIR_MODE, dir_fd=d.fd)
                with d.child("screens") as screens:
                    for n, (png, text) in enumerate(brief.screens, start=1):
                        if text is not None:
                            atomic.write_replace(screens, f"{n}.txt", redact(text).text.encode("utf-8"))
                        atomic.write_replace(screens, f"{n}.png", png)
            atomic.write_replace(d, "brief.json", _json_bytes(meta))
            return Path(board) / d.rel
