"""``memoryd hook claude-stop``: Claude Code's Stop hook that gets an outcome written for a brief.

Claude Code runs the command when the main agent finishes a turn and passes JSON on stdin:
``{"session_id", "transcript_path", "cwd", "hook_event_name": "Stop", "stop_hook_active": bool, ...}``
(code.claude.com/docs/en/hooks). Printing ``{"decision": "block", "reason": ...}`` makes the agent
continue with ``reason`` as its instruction; printing nothing lets it stop.

The transcript is JSONL, one object per line: ``{"type": "user"|"assistant"|..., "timestamp": ISO-8601,
"message": {"role", "content": str | [blocks]}, "isSidechain"?, "isMeta"?}``; tool calls are assistant
``tool_use`` blocks (``name``, ``input``), their results user ``tool_result`` blocks. The turn that is
ending starts at the last user line typed by the person (text, not only tool results; not ``isMeta``,
``isSidechain`` or ``isCompactSummary`` lines).

Blocks once, only when that turn's opening message is a brief on the board handed to the agent: it names
the brief's id (pattern :data:`memoryd.board.gate.BRIEF_ID_PATTERN`) and carries its ``prompt.md``
(whitespace aside); a mere mention of an id is not a brief. Only while the brief has no outcome: no
``outcome.md`` at all (an earlier report is never asked to be replaced) and no successful ``save_outcome``
call for it in the turn. Never when ``stop_hook_active`` is true (Claude Code is already continuing because
of a Stop hook), never when the opening message is memoryd's own reminder. Any error allows the stop, with one line on stderr.

Imports stay light (no LanceDB, onnxruntime or MCP SDK) so the hook answers well within a second.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO, TextIO

# Same pattern as memoryd.board.gate.BRIEF_ID_PATTERN (a test keeps them equal), not imported from there:
# the hook's imports stay light.
BRIEF_ID = re.compile(r"(?<![0-9A-Za-z_-])(b-\d{8}-[0-9a-f]{6})(?![0-9A-Za-z_-])", re.ASCII)
MARKER = "[memoryd]"
_CHUNK = 1 << 16
_MAX_SCAN_BYTES = 256 << 20  # a turn larger than this is not inspected (allow)
_MAX_PROMPT_CHARS = 1 << 20  # a prompt.md larger than this is not compared (allow)


@dataclass
class Turn:
    """The turn that is ending: its opening text, when it began (epoch s), its tool calls."""

    text: str
    started: float
    saved: set[str] = field(default_factory=set)  # brief ids with a successful save_outcome in the turn


def _reverse_lines(handle: BinaryIO):
    """The file's lines, last first (bytes, without newlines)."""
    handle.seek(0, os.SEEK_END)
    pos = handle.tell()
    scanned = 0
    rest = b""
    while pos > 0:
        size = min(_CHUNK, pos)
        pos -= size
        handle.seek(pos)
        block = handle.read(size) + rest
        scanned += size
        if scanned > _MAX_SCAN_BYTES:
            raise ValueError("the turn is larger than the hook inspects")
        lines = block.split(b"\n")
        rest = lines[0]
        yield from reversed(lines[1:])
    yield rest


def _content_blocks(message: Any) -> list[Any]:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def _is_prompt(line: dict[str, Any]) -> bool:
    """A user line typed by the person: text/image blocks, not only tool results or meta messages."""
    if line.get("type") != "user" or line.get("isMeta") or line.get("isSidechain"):
        return False
    if line.get("isCompactSummary"):  # Claude Code's summary of earlier turns, not a new prompt
        return False
    return any(
        isinstance(b, dict) and b.get("type") in ("text", "image")
        for b in _content_blocks(line.get("message"))
    )


def _text(line: dict[str, Any]) -> str:
    return "\n".join(
        b.get("text", "")
        for b in _content_blocks(line.get("message"))
        if isinstance(b, dict) and b.get("type") == "text"
    )


def _timestamp(value: Any) -> float:
    if not isinstance(value, str):
        raise ValueError("the turn's opening message has no timestamp")
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def last_turn(transcript: Path) -> Turn | None:
    """The ending turn of a Claude Code transcript, or ``None`` when it has no typed user message."""
    calls: dict[str, str] = {}  # tool_use id -> brief id (save_outcome calls)
    ok: set[str] = set()  # tool_use ids whose result is not an error
    with open(transcript, "rb") as handle:
        for raw in _reverse_lines(handle):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except ValueError:
                continue  # a line being written right now
            if not isinstance(line, dict) or line.get("isSidechain"):
                continue
            if _is_prompt(line):
                turn = Turn(_text(line), _timestamp(line.get("timestamp")))
                turn.saved = {brief for use_id, brief in calls.items() if use_id in ok}
                return turn
            for block in _content_blocks(line.get("message")):
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use" and str(block.get("name", "")).endswith("save_outcome"):
                    brief = (block.get("input") or {}).get("brief_id")
                    if isinstance(brief, str):
                        calls[str(block.get("id"))] = brief
                elif block.get("type") == "tool_result" and not block.get("is_error"):
                    ok.add(str(block.get("tool_use_id")))
    return None


def _squeeze(text: str) -> str:
    return " ".join(text.split())


def was_handed(board: Path, brief: str, opening: str) -> bool:
    """Whether the turn's opening message is brief ``brief``: its ``prompt.md`` (whitespace aside) is in it.

    An id that is only mentioned ("see b-… for context") is not a brief handed to the agent."""
    try:
        with open(board / "briefs" / brief / "prompt.md", encoding="utf-8", errors="replace") as fh:
            prompt = _squeeze(fh.read(_MAX_PROMPT_CHARS + 1))
    except OSError:
        return False
    return bool(prompt) and len(prompt) <= _MAX_PROMPT_CHARS and prompt in _squeeze(opening)


def reason_for(briefs: list[str]) -> str:
    ids = ", ".join(briefs)
    return (
        f"{MARKER} This turn started from memoryd brief {ids}, and no outcome has been saved for it yet. "
        f"Before you stop, call the memoryd tool save_outcome with brief_id={briefs[0]!r}"
        + (" (and once for each other brief)" if len(briefs) > 1 else "")
        + ": `did` = what you did, `open` = what is still open or unverified (plus `decided`, `files`, "
        "`retired` when they apply). Then finish your answer."
    )


def decide(payload: Any, board: Path | None = None) -> dict[str, str] | None:
    """The hook's answer for one stdin payload: a block object, or ``None`` to allow the stop.

    Raises on malformed input or unreadable transcripts; :func:`main` turns that into "allow".
    """
    if not isinstance(payload, dict):
        raise ValueError("the hook input is not a JSON object")
    if payload.get("stop_hook_active") is True:
        return None
    transcript = payload.get("transcript_path")
    if not isinstance(transcript, str) or not transcript:
        raise ValueError("the hook input has no transcript_path")
    turn = last_turn(Path(transcript).expanduser())
    if turn is None or MARKER in turn.text:
        return None
    named = list(dict.fromkeys(BRIEF_ID.findall(turn.text)))
    if not named:
        return None
    if board is None:
        from memoryd.serve.control import served_board

        board = served_board()
    # An existing outcome.md means "reported": asking again would get it replaced by this turn's account.
    pending = [
        brief
        for brief in named
        if brief not in turn.saved
        and not (board / "briefs" / brief / "outcome.md").exists()
        and was_handed(board, brief, turn.text)
    ]
    if not pending:
        return None
    return {"decision": "block", "reason": reason_for(pending)}


def capture_stop_installed(settings: Path | None = None) -> bool:
    """Whether Claude Code's user settings hold memoryd's capture Stop hook."""
    from memoryd.cli.connect import capturehooks

    path = settings or Path.home() / ".claude" / "settings.json"
    try:
        return "Stop" in capturehooks.read(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False


def main(stdin: TextIO | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Run the hook on ``stdin``; always returns 0 (an error means "allow" plus a line on ``stderr``)."""
    stdin, stdout, stderr = stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr
    try:
        payload = json.loads(stdin.read())
        # With memoryd's capture hooks installed, their Stop hook asks for the outcome (of captured briefs and
        # of briefs the prompt names): asking here too would make the agent hear it twice in one turn.
        answer = None if capture_stop_installed() else decide(payload)
    except Exception as exc:  # noqa: BLE001 - the hook must never fail the agent's stop
        print(f"memoryd hook claude-stop: allowing the stop ({type(exc).__name__}: {exc})", file=stderr)
        return 0
    if answer is not None:
        stdout.write(json.dumps(answer) + "\n")
        stdout.flush()
    return 0
