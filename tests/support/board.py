"""Builders for small real boards in tmp_path (no mocks), shared by the board tests."""

from __future__ import annotations

import json
from pathlib import Path

TASK = "t-20260101-aaaaaa"
BRIEF = "b-20260101-bbbbbb"
OUTSIDE_WORDS = "OUTSIDE-THE-BOARD-do-not-read"


def write_task(root: Path, task_id: str = TASK, **fields: object) -> Path:
    data = {"id": task_id, "title": "Fix the thing", "project": "shopfront", "status": "open"}
    data["created_at"] = "2026-01-01T10:00:00Z"
    data.update(fields)
    path = root / "tasks" / f"{task_id}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def write_brief(
    root: Path,
    brief_id: str = BRIEF,
    task_id: str = TASK,
    said: str | None = "the checkout button does nothing",
    prompt: str | None = "## Ask\nFind out why.",
    screens: dict[str, str] | None = None,
    **fields: object,
) -> Path:
    d = root / "briefs" / brief_id
    d.mkdir(parents=True, exist_ok=True)
    data = {"id": brief_id, "task": task_id, "project": "shopfront", "created_at": "2026-01-01T10:05:00Z"}
    data.update(title="Checkout button", summary="Nothing happens on click.")
    data.update(fields)
    (d / "brief.json").write_text(json.dumps(data), encoding="utf-8")
    if said is not None:
        (d / "said.txt").write_text(said, encoding="utf-8")
    if prompt is not None:
        (d / "prompt.md").write_text(prompt, encoding="utf-8")
    for n, text in (screens or {}).items():
        s = d / "screens"
        s.mkdir(exist_ok=True)
        (s / f"{n}.png").write_bytes(b"\x89PNG\r\n\x1a\n")
        (s / f"{n}.txt").write_text(text, encoding="utf-8")
        (s / f"{n}.json").write_text(
            json.dumps({"app": "Chrome", "window_title": f"screen {n}"}), encoding="utf-8"
        )
    return d
