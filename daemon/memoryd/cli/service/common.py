"""What the launchd and systemd managers share: the error type, running the manager's command-line tool,
atomic writes, and the marker that tells our files from a person's.

Every action a manager takes is reported through :class:`Actions` (``print`` by default), so ``memoryd
service install`` prints exactly what it did: each file written or removed and each command run.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: First line (as a comment) of every file ``memoryd service install`` writes; ``uninstall`` removes a
#: file only when it carries this marker, so a hand-written plist or unit is never deleted.
MARKER = "written by `memoryd service install`; `memoryd service uninstall` removes it"
LABEL = "dev.memoryd.daemon"  # the launchd label (contract §1)
UNIT = "memoryd"  # systemd: memoryd.service + memoryd.socket
COMMAND_TIMEOUT_S = 60.0


class ServiceError(Exception):
    """A service operation failed; the message says what and what to run. ``exit_code`` for the CLI."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class Actions:
    """Reports each action as one line (``say``), and keeps them (``done``) for tests and summaries."""

    say: Callable[[str], None] = print
    done: list[str] = field(default_factory=list)

    def __call__(self, line: str) -> None:
        self.done.append(line)
        self.say(line)


def quiet() -> Actions:
    """An :class:`Actions` that records without printing (``service_state`` and status probes)."""
    return Actions(say=lambda _line: None)


@dataclass(frozen=True)
class Result:
    """A finished command: ``code`` (exit status; 127 when the tool is missing), ``out``, ``err``."""

    argv: tuple[str, ...]
    code: int
    out: str
    err: str

    @property
    def ok(self) -> bool:
        return self.code == 0

    def explain(self) -> str:
        text = (self.err or self.out).strip().splitlines()
        return f"`{shlex.join(self.argv)}` exited with {self.code}" + (f": {text[-1]}" if text else "")


def run(argv: Sequence[str], actions: Actions | None, *, check: bool = False) -> Result:
    """Run a manager tool (``launchctl``, ``systemctl``...) found on ``PATH`` (tests put a recording stub
    first). ``actions`` gets ``$ <command>`` before it runs (``None``: a silent probe). Never raises
    for a missing tool or a failure unless ``check`` (then :class:`ServiceError`)."""
    argv = tuple(argv)
    if actions is not None:
        actions(f"$ {shlex.join(argv)}")
    exe = shutil.which(argv[0])
    if exe is None:
        result = Result(argv, 127, "", f"{argv[0]}: command not found on PATH")
    else:
        try:
            done = subprocess.run(
                [exe, *argv[1:]],
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            )
            result = Result(argv, done.returncode, done.stdout, done.stderr)
        except subprocess.TimeoutExpired:
            result = Result(argv, 124, "", f"timed out after {COMMAND_TIMEOUT_S:g} s")
        except OSError as exc:
            result = Result(argv, 126, "", str(exc))
    if check and not result.ok:
        raise ServiceError(result.explain())
    return result


def atomic_write(path: Path, text: str, mode: int = 0o644) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_text(path: Path) -> str | None:
    """The file's text, or ``None`` when it does not exist or cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def is_ours(path: Path) -> bool:
    """Whether ``path`` is a file ``memoryd service install`` wrote (it carries :data:`MARKER`)."""
    text = read_text(path)
    return text is not None and MARKER in text
