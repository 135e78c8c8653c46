"""Helpers of the real-client tests: installing the pinned npm packages, and the agent CLIs' quiet mode."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

NPM_CI_TIMEOUT_S = 900
#: npm's own words for "could not reach the registry" (its error codes are Node's network errno names).
UNREACHABLE = re.compile(
    r"\b(ENOTFOUND|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EAI_AGAIN|ENETUNREACH|EHOSTUNREACH)\b"
    r"|npm (?:ERR!|error) network"
)
#: What the agent CLIs document to keep them from phoning home (no update checks, no telemetry).
QUIET_CLIS = {
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "GEMINI_TELEMETRY_ENABLED": "false",
    "NO_UPDATE_NOTIFIER": "1",
    "NO_COLOR": "1",
}


def npm_ci(folder: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``npm ci`` in ``folder`` (output captured); fails the test when npm is missing or hangs."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail(
            "npm is needed to install the pinned MCP clients in tests/clients (any Node >= 18 with npm)"
        )
    try:
        return subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=folder, env=env, capture_output=True, text=True, timeout=NPM_CI_TIMEOUT_S, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"npm ci in {folder} did not finish within {NPM_CI_TIMEOUT_S} s")


def registry_unreachable(npm_output: str) -> bool:
    """Whether a failed npm run says it could not reach the registry."""
    return UNREACHABLE.search(npm_output) is not None
