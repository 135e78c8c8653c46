"""The project of a session: the folder name of the git work tree around the agent's working directory.

The shim sends its working directory in the hello (contract §4). A memory stored from that session is
filed under the name of the enclosing git root (the nearest folder upwards holding ``.git``, a folder in a
clone or a file in a worktree/submodule), the same name briefs use for ``project``. Outside any work tree
(or with no working directory, e.g. ``/``) there is no project: ``""``.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

PROJECT_CHARS = 100


@lru_cache(maxsize=256)
def project_of(cwd: str | None) -> str:
    """The git root's folder name for ``cwd`` (an absolute path), or ``""``. Never raises."""
    if not cwd or not os.path.isabs(cwd):
        return ""
    try:
        here = Path(cwd)
        for folder in (here, *here.parents):
            if folder == folder.parent:  # the file-system root is never a project
                break
            if os.path.lexists(folder / ".git"):
                return folder.name[:PROJECT_CHARS]
    except (OSError, ValueError):
        return ""
    return ""
