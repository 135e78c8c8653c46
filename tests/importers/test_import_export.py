"""``memoryd import --from jsonl``: a memoryd export holds tasks, briefs, session turns and summaries besides
memories, and the summary counts every kind the import wrote (or, with ``--dry-run``, would write)."""

from __future__ import annotations

import re
from pathlib import Path

from memoryd.kinds.memories.files import Memory, write_memory
from memoryd.kinds.sessions import files as sessions
from memoryd.kinds.sessions.format import Interaction
from memoryd.kinds.sessions.summarize import extractive
from support.briefs import write_briefs
from support.importers import board_snapshot, run_cli


def exported(tmp_path: Path) -> Path:
    """An export of a board of 2 tasks and their 2 briefs, 1 memory, 3 session turns in one session and
    that session's summary."""
    board = tmp_path / "source"
    write_briefs(board, ["Fix the checkout button colour", "Write the release notes"])
    write_memory(board, Memory.new("Deploys happen on Tuesdays", memory_type="fact"))
    turns = [Interaction.new("s-export", f"prompt {n}", "", f"answer {n}") for n in range(3)]
    sessions.write_log(board, "s-export", turns)
    sessions.write_summary(board, extractive("s-export", turns))
    out = tmp_path / "export.jsonl"
    done = run_cli("export", str(out), "--board", str(board), env_home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    return out


def counts(stdout: str) -> dict[str, tuple[int, int]]:
    """``{label: (new, already on the board)}`` from the human summary's lines."""
    found = re.findall(r"^  ([a-z ]+):\s+(\d+) (?:would be )?new, (\d+) already on the board", stdout, re.M)
    return {label: (int(new), int(old)) for label, new, old in found}


def test_the_summary_counts_every_kind_an_export_import_writes(tmp_path):
    source, target = exported(tmp_path), tmp_path / "target"
    home = tmp_path / "home"
    want = {
        "memories": (1, 0),
        "relations": (0, 0),
        "tasks": (2, 0),
        "briefs": (2, 0),
        "session turns": (3, 0),
        "summaries": (1, 0),
    }

    dry = run_cli(
        "import", "--from", "jsonl", str(source), "--board", str(target), "--dry-run", env_home=home
    )
    assert dry.returncode == 0, dry.stderr
    assert counts(dry.stdout) == want, dry.stdout
    assert "dry run: nothing was written" in dry.stdout and board_snapshot(target) == {}

    done = run_cli("import", "--from", "jsonl", str(source), "--board", str(target), env_home=home)
    assert done.returncode == 0, done.stderr
    assert counts(done.stdout) == want, done.stdout
    assert "the running daemon indexes the new files" in done.stdout

    again = run_cli("import", "--from", "jsonl", str(source), "--board", str(target), env_home=home)
    assert counts(again.stdout) == {label: (0, new) for label, (new, _) in want.items()}, again.stdout
    assert "indexes the new files" not in again.stdout
    dry_again = run_cli(
        "import", "--from", "jsonl", str(source), "--board", str(target), "--dry-run", env_home=home
    )
    assert counts(dry_again.stdout) == counts(again.stdout), dry_again.stdout
