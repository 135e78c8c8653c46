"""Turning what a developer typed into a brief: the text rules, its title and summary, its screenshots.

Text rules (:func:`clean_prompt`), applied before anything touches the disk:

* ``<private>…</private>`` spans are cut out by :func:`memoryd_shim.textrules.strip_private`, the rule the
  hooks apply before sending (case-insensitive, nesting-aware, across lines; an unclosed ``<private>``
  hides everything after it), so that text is never stored anywhere;
* secrets are replaced by :func:`memoryd.index.redact.redact`'s placeholders, so ``said.txt`` and
  ``prompt.md`` never hold a key the rules know;
* what is left is **not a brief** when it is empty, only a slash command (``/clear``, ``/model opus``:
  one line starting with ``/word`` whose word holds no further ``/``), or a tool approval / menu answer
  (``y``, ``yes``, ``ok``, ``1``, ``approve`` …: see :data:`APPROVALS`).

The writes of a new brief and its task are :mod:`memoryd.kinds.briefs.newbrief`'s.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from dataclasses import dataclass
from datetime import UTC, datetime

from memoryd.board.gate import DEFAULT_MAX_BYTES
from memoryd.index.redact import redact
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
