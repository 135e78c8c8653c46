"""The board: a folder of plain files that is the truth (contract §3); everything else is derived from it.

``ids`` (id patterns), ``gate`` (the one gate for every file read), ``formats`` (records and parsers),
``reader`` (read a board, tolerating broken files), ``writer`` (``save_outcome``, ``ensure_board``).
See docs/board.md.
"""

from memoryd.board.formats import Brief, Outcome, Screen, Task, parse_outcome, render_outcome
from memoryd.board.gate import BrokenFile, UnsafePath, is_safe_file, list_dir, safe_read_bytes, safe_read_text
from memoryd.board.ids import (
    BRIEF_ID_PATTERN,
    TASK_ID_PATTERN,
    InvalidId,
    check_brief_id,
    check_task_id,
    is_brief_id,
    is_task_id,
)
from memoryd.board.reader import BoardReader, BoardSnapshot, BoardUnreadable, Skipped
from memoryd.board.writer import BriefNotFound, ensure_board, save_outcome

__all__ = [
    "BRIEF_ID_PATTERN",
    "TASK_ID_PATTERN",
    "BoardReader",
    "BoardSnapshot",
    "BoardUnreadable",
    "Brief",
    "BriefNotFound",
    "BrokenFile",
    "InvalidId",
    "Outcome",
    "Screen",
    "Skipped",
    "Task",
    "UnsafePath",
    "check_brief_id",
    "check_task_id",
    "ensure_board",
    "is_brief_id",
    "is_safe_file",
    "is_task_id",
    "list_dir",
    "parse_outcome",
    "render_outcome",
    "safe_read_bytes",
    "safe_read_text",
    "save_outcome",
]
