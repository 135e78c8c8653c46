"""Diagnostics on stderr: agents keep a server's stderr in their MCP logs. stdout is never used for this."""

from __future__ import annotations

import os
import sys


def log(text: str) -> None:
    """One ``memoryd-shim[<pid>]: <text>`` line on stderr; never raises."""
    try:
        sys.stderr.write(f"memoryd-shim[{os.getpid()}]: {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
