"""The README's shell commands work as typed from a fresh checkout after ``make setup``.

``make setup`` installs ``memoryd`` into the checkout's ``.venv``, which is not on anyone's ``PATH``, so a
bare ``memoryd`` only works after the README's one PATH step (a link into ``~/.local/bin``). Checked on
the README's ``sh`` code blocks: the step is there, comes before every bare ``memoryd`` command, and
really puts this checkout's ``memoryd`` on PATH (run in a temporary HOME); every sub-command named exists.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

from memoryd import __version__

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PATH_STEP = 'mkdir -p ~/.local/bin && ln -sf "$PWD/.venv/bin/memoryd" ~/.local/bin/memoryd'
_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.DOTALL | re.MULTILINE)


def shell_lines() -> list[tuple[int, str]]:
    """``(line number, command line without its comment)`` for every line of the README's sh blocks."""
    text = README.read_text(encoding="utf-8")
    out = []
    for block in _BLOCK.finditer(text):
        first = text.count("\n", 0, block.start(1)) + 1
        for offset, line in enumerate(block.group(1).splitlines()):
            words = shlex.split(line, comments=True)
            if words:
                out.append(
                    (first + offset, shlex.join(words) if not line.startswith(PATH_STEP) else PATH_STEP)
                )
    return out


def commands(line: str) -> list[list[str]]:
    """The simple commands of a line (split at ``&&``, ``||``, ``;`` and ``|``)."""
    found, current = [], []
    for word in shlex.split(line):
        if word in ("&&", "||", ";", "|"):
            found.append(current)
            current = []
        else:
            current.append(word)
    return [c for c in [*found, current] if c]


def test_every_bare_memoryd_comes_after_the_step_that_puts_it_on_path():
    lines = shell_lines()
    steps = [n for n, line in lines if line == PATH_STEP]
    assert steps, f"the README must show how to put memoryd on PATH: {PATH_STEP}"
    bare = [(n, line) for n, line in lines for c in commands(line) if c[0] == "memoryd"]
    assert bare, "the README names memoryd commands"
    assert [(n, line) for n, line in bare if n < steps[0]] == [], "a bare memoryd before the PATH step"
    venv = [(n, line) for n, line in lines if line != PATH_STEP and ".venv/bin/memoryd" in line]
    assert venv == [], "after the PATH step the README types plain memoryd"


def test_the_path_step_puts_this_checkouts_memoryd_on_path(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    subprocess.run(["/bin/sh", "-c", PATH_STEP], cwd=REPO, env=env, check=True, timeout=60)
    link = home / ".local" / "bin" / "memoryd"
    assert link.resolve() == (REPO / ".venv" / "bin" / "memoryd").resolve()
    env["PATH"] = f"{home / '.local' / 'bin'}:/usr/bin:/bin"  # what the README's profile line adds
    shown = subprocess.run(
        ["memoryd", "--version"], env=env, capture_output=True, text=True, timeout=120, cwd="/"
    )
    assert shown.returncode == 0 and shown.stdout.strip() == f"memoryd {__version__}", shown.stderr


def test_every_memoryd_sub_command_in_the_readme_exists():
    named = {c[1] for _, line in shell_lines() for c in commands(line) if c[0] == "memoryd" and len(c) > 1}
    named = {n for n in named if not n.startswith("-")}
    assert {"connect", "disconnect", "doctor", "search", "status", "service"} <= named
    memoryd = REPO / ".venv" / "bin" / "memoryd"
    for sub in sorted(named):
        result = subprocess.run([str(memoryd), sub, "--help"], capture_output=True, text=True, timeout=120,
                                env={**os.environ, "HOME": "/nonexistent"}, cwd="/")  # fmt: skip
        assert result.returncode == 0, (sub, result.stderr)
