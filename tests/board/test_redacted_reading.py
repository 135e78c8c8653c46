"""The reader redacts every stored text as a whole before it is parsed into parts.

Every secret kind of :mod:`support.layouts` in every layout, written into ``outcome.md``, ``notes.md``,
``said.txt``, ``prompt.md``, a screen's text and ``brief.json``: the brief :class:`BoardReader` returns holds
no piece of any secret and no private-key marker in any bullet or note; the parts parsed from the redacted
text hold nothing a second redaction would still find (parsing can join lines, and it must not assemble a
secret); the counts a second redaction would report are none; and the files on the board are unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.index.redact import redact
from memoryd.kinds.briefs.reader import BoardReader
from memoryd.kinds.briefs.writer import ensure_board
from support.board import TASK, write_task
from support.layouts import KINDS, LAYOUTS, lay_out  # noqa: E402

BRIEF = "b-20260101-cccccc"


def write_case(root: Path, name: str, layout: str) -> dict[str, tuple[str, ...]]:
    """A brief holding the secret ``name`` in ``layout`` in every file; returns its pieces per file."""
    secrets = {
        place: KINDS[name](f"{name}/{layout}/{place}") for place in ("outcome", "notes", "said", "screen")
    }
    text = {place: lay_out(s.lines, layout) for place, s in secrets.items()}
    d = root / "briefs" / BRIEF
    (d / "screens").mkdir(parents=True)
    meta = {"id": BRIEF, "task": TASK, "project": "shop", "created_at": "2026-01-01T10:05:00Z",
            "title": "Rotate keys", "summary": "where the keys went"}  # fmt: skip
    (d / "brief.json").write_text(json.dumps(meta))
    (d / "outcome.md").write_text(f"## Did\n- rotated it\n{text['outcome']}\n- restarted\n## Open\n- none\n")
    (d / "notes.md").write_text(f"- first note\n{text['notes']}\n- last note\n")
    (d / "said.txt").write_text(f"here it is:\n{text['said']}\nthanks")
    (d / "prompt.md").write_text(f"Use this:\n{text['said']}")
    (d / "screens" / "1.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (d / "screens" / "1.txt").write_text(text["screen"])
    return {place: s.pieces + s.markers for place, s in secrets.items()}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", list(KINDS))
def test_no_part_of_a_brief_holds_a_piece_of_a_secret(tmp_path, name, layout):
    root = tmp_path / "board"
    ensure_board(root)
    write_task(root)
    pieces = write_case(root, name, layout)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}

    brief = BoardReader(root).read_brief(BRIEF)
    o = brief.outcome
    parts = {
        "outcome": [*o.did, *o.decided, *o.open, *o.files, *o.retired],
        "notes": list(brief.notes),
        "said": [brief.said, brief.prompt],
        "screen": [s.text for s in brief.screens],
    }
    for place, texts in parts.items():
        for text in texts:
            assert not [p for p in pieces[place] if p in text], (place, text)
            assert redact(text).counts == {}, (place, text)  # parsing assembled no secret either
    assert parts["outcome"][0].startswith("rotated it") and parts["outcome"][-1] == "restarted"
    assert parts["notes"][0] == "first note" and parts["notes"][-1] == "last note"
    assert before == {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}  # the board is the user's


def test_json_strings_are_redacted_once_decoded(tmp_path):
    """A JSON escape (``\\u0041KIA...``) hides a key from a rule reading the file's bytes, not the text."""
    root = tmp_path / "board"
    ensure_board(root)

    def write(path: Path, obj: dict) -> None:
        path.write_text(json.dumps(obj).replace("AKIA", "\\u0041KIA"))  # "A" as a JSON escape

    write(root / "tasks" / f"{TASK}.json", {"id": TASK, "title": "rotate AKIAQX7RT2LMNB4KZW9P now",
          "project": "shop", "status": "open", "created_at": "2026-01-01T10:00:00Z"})  # fmt: skip
    (root / "briefs" / BRIEF).mkdir(parents=True)
    write(root / "briefs" / BRIEF / "brief.json", {"id": BRIEF, "task": TASK, "project": "shop",
          "created_at": "2026-01-01T10:05:00Z", "title": "key AKIAQX7RT2LMNB4KZW9P",
          "summary": 'password="Wq7rTz9Lp2vXk"'})  # fmt: skip
    assert "AKIA" not in (root / "briefs" / BRIEF / "brief.json").read_text()
    reader = BoardReader(root)
    brief, task = reader.read_brief(BRIEF), reader.read_task(TASK)
    assert brief.title == "key [REDACTED:aws-access-key-id]"
    assert brief.summary == 'password="[REDACTED:secret-assignment]"'
    assert task.title == "rotate [REDACTED:aws-access-key-id] now"


def test_the_reader_keeps_which_placeholders_it_wrote_where_a_file_held_some(tmp_path):
    # A file redacted before (capture writes a prompt redacted) holds placeholders: the read tells them from
    # the ones it writes itself, in each text and each part it parses out, so answers count only the latter.
    root = tmp_path / "board"
    ensure_board(root)
    write_task(root, title="Rotate [REDACTED:aws-access-key-id]")
    token = "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    d = root / "briefs" / BRIEF
    d.mkdir()
    meta = {"id": BRIEF, "task": TASK, "project": "shop", "created_at": "2026-01-01T10:05:00Z",
            "title": "Rotate keys", "summary": ""}  # fmt: skip
    (d / "brief.json").write_text(json.dumps(meta))
    (d / "said.txt").write_text(f"  old [REDACTED:jwt], new {token}  \n")
    (d / "prompt.md").write_text(f"only new: {token}")
    (d / "outcome.md").write_text(
        f"## Did\n- moved [REDACTED:jwt] out\n- added {token} and\n  kept [REDACTED:jwt]\n## Open\n- none\n"
    )
    reader = BoardReader(root)
    brief, task = reader.read_brief(BRIEF), reader.read_task(TASK)
    assert task.held == {"Rotate [REDACTED:aws-access-key-id]": (False,)}
    assert brief.outcome.did == (
        "moved [REDACTED:jwt] out",
        "added [REDACTED:github-token] and kept [REDACTED:jwt]",
    )
    assert brief.held == {
        "old [REDACTED:jwt], new [REDACTED:github-token]": (False, True),  # said, stripped
        "moved [REDACTED:jwt] out": (False,),
        "added [REDACTED:github-token] and kept [REDACTED:jwt]": (True, False),  # a bullet and its next line
    }  # the prompt held none: every placeholder in it was written by the read
