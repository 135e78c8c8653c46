"""The project of a working directory: one name per git repository, however it is checked out.

Used by capture (a prompt's brief), ``save_outcome``'s brief, memories' scoping and the session-start digest,
so the same folder always lands in the same project.

The rule, from the working directory upwards:

* inside a git work tree, the project is the repository's **common directory** (``git rev-parse
  --git-common-dir``): the ``.git`` folder of a clone, or the main clone's ``.git`` that every linked
  worktree's ``.git`` file points to (``gitdir:`` then ``commondir``). Its name is the ``origin`` remote's
  last path component (``git@host:team/shopfront.git`` -> ``shopfront``), so two clones of one remote are
  one project; without an ``origin`` it is the folder holding the common directory;
* outside any work tree, the working directory's own folder name; the file-system root and ``$HOME``
  itself are no project (``""``), nor is a missing or relative path.

Git is never run (the answer must cost microseconds in the daemon and in hooks): the few files above are
read directly. Names are cut to :data:`PROJECT_CHARS`.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path

PROJECT_CHARS = 100
_ORIGIN = re.compile(r'^\s*\[remote\s+"origin"\]\s*$')
_SECTION = re.compile(r"^\s*\[")
_URL = re.compile(r"^\s*url\s*=\s*(?P<url>\S+)\s*$")


def _read_small(path: Path, limit: int = 1 << 16) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(limit)
    except OSError:
        return ""


def git_dir(dot_git: Path) -> Path | None:
    """The git directory of a ``.git`` entry: the folder itself, or where its ``gitdir:`` file points
    (a linked worktree's, a submodule's); None if unusable."""
    if dot_git.is_dir():
        return dot_git
    text = _read_small(dot_git, 4096).strip()
    if not text.startswith("gitdir:"):
        return None
    gitdir = Path(text[len("gitdir:") :].strip())
    return gitdir if gitdir.is_absolute() else (dot_git.parent / gitdir).resolve()


def common_dir(dot_git: Path) -> Path | None:
    """The repository's common directory for a ``.git`` entry (folder or ``gitdir:`` file); None if unusable."""
    gitdir = git_dir(dot_git)
    if gitdir is None or gitdir == dot_git:
        return gitdir
    pointer = _read_small(gitdir / "commondir", 4096).strip()
    if pointer:
        common = Path(pointer)
        return common if common.is_absolute() else (gitdir / common).resolve()
    return gitdir  # a submodule's own git dir, or a worktree of an older git


def origin_name(common: Path) -> str:
    """The last path component of ``remote.origin.url`` in ``<common>/config`` (``.git`` dropped), or ``""``."""
    in_origin = False
    for line in _read_small(common / "config").splitlines():
        if _SECTION.match(line):
            in_origin = bool(_ORIGIN.match(line))
            continue
        m = _URL.match(line) if in_origin else None
        if m:
            tail = re.split(r"[/:\\]", m.group("url").rstrip("/"))[-1]
            return tail[:-4] if tail.endswith(".git") else tail
    return ""


def _repo_name(common: Path) -> str:
    name = origin_name(common)
    if name:
        return name
    # <repo>/.git -> "repo"; a bare repository "shopfront.git" -> "shopfront"
    folder = common.parent if common.name == ".git" else common
    return folder.name[:-4] if folder.name.endswith(".git") else folder.name


def _work_tree(here: Path) -> tuple[Path, Path] | None:
    """The nearest folder at or above ``here`` holding a ``.git`` (a folder or a worktree's file), and that
    ``.git``; None when there is none (the file-system root itself is never looked at)."""
    for folder in (here, *here.parents):
        if folder == folder.parent:
            return None
        dot_git = folder / ".git"
        if os.path.lexists(dot_git):
            return folder, dot_git
    return None


@lru_cache(maxsize=256)
def project_of(cwd: str | None) -> str:
    """The project name for ``cwd`` (an absolute path), by the module's rule; ``""`` for none. Never raises."""
    if not cwd or not os.path.isabs(cwd):
        return ""
    try:
        here = Path(cwd)
        found = _work_tree(here)
        if found is not None:
            folder, dot_git = found
            common = common_dir(dot_git)
            name = _repo_name(common) if common is not None else folder.name
            return (name or folder.name)[:PROJECT_CHARS]
        home = os.environ.get("HOME")
        if here == here.parent or (home and os.path.abspath(home) == os.path.abspath(cwd)):
            return ""
        return here.name[:PROJECT_CHARS]
    except (OSError, ValueError):
        return ""


def no_project_reason(cwd: str | None) -> str:
    """Why ``cwd`` is no project, in words (``"your home folder"``, ``"the file-system root"``), or ``""``
    when it is one or the reason is another (a missing or relative path)."""
    if not cwd or not os.path.isabs(cwd) or project_of(cwd):
        return ""
    if Path(cwd) == Path(cwd).parent:
        return "the file-system root"
    home = os.environ.get("HOME")
    return "your home folder" if home and os.path.abspath(home) == os.path.abspath(cwd) else ""


def branch_of(cwd: str | None) -> str:
    """The checked-out branch of the work tree around ``cwd`` (``HEAD``'s ``refs/heads/...``), else ``""``."""
    if not cwd or not os.path.isabs(cwd):
        return ""
    try:
        found = _work_tree(Path(cwd))
        if found is None:
            return ""
        gitdir = git_dir(found[1])
        if gitdir is None:
            return ""
        head = _read_small(gitdir / "HEAD", 4096).strip()
        prefix = "ref: refs/heads/"
        return head[len(prefix) :][:PROJECT_CHARS] if head.startswith(prefix) else ""
    except (OSError, ValueError):
        return ""
