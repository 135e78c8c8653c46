"""Fixtures for ``memoryd connect``: a temporary HOME holding realistic configs for every agent.

The files look like what each agent writes itself (other MCP servers already configured, Claude Code's
bookkeeping keys, comments in Codex's TOML, VS Code's tab-indented or commented JSON), plus the awkward
cases: a config that is a symlink into a dotfiles folder, one that does not parse, and one with comments.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

CLAUDE_JSON = """{
  "numStartups": 42,
  "installMethod": "native",
  "autoUpdates": false,
  "tipsHistory": {
    "new-user-warmup": 7
  },
  "mcpServers": {
    "github": {
      "type": "stdio",
      "command": "npx",
      "args": [
        "-y",
        "@modelcontextprotocol/server-github"
      ],
      "env": {
        "GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_example"
      }
    }
  },
  "projects": {
    "/Users/me/src/shopfront": {
      "allowedTools": [],
      "mcpServers": {
        "postgres": {
          "command": "uvx",
          "args": ["mcp-server-postgres"]
        }
      },
      "hasTrustDialogAccepted": true
    }
  },
  "oauthAccount": {
    "emailAddress": "me@example.com"
  }
}
"""

CLAUDE_SETTINGS = """{
  "$schema": "https://json.schemastore.org/claude-code-settings.json",
  "permissions": {
    "allow": ["Bash(npm run test:*)"],
    "deny": ["Read(./.env)"]
  },
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [{"type": "command", "command": "~/bin/guard.sh"}]
      }
    ],
    "Stop": [
      {
        "hooks": [{"type": "command", "command": "afplay /System/Library/Sounds/Glass.aiff"}]
      }
    ]
  },
  "model": "opus"
}
"""

CODEX_TOML = """# Codex CLI configuration (hand-written; keep the comments!)
model = "gpt-5-codex"          # default model
approval_policy = "on-request"

# Docs lookups for every project
[mcp_servers.context7]
command = "npx"
args = ["-y", "@upstash/context7-mcp"]
startup_timeout_sec = 20

[mcp_servers.context7.env]
CONTEXT7_API_KEY = "c7-example"   # rotated monthly

[profiles.fast]
model = "gpt-5-mini"
"""

CURSOR_JSON = """{
  "mcpServers": {
    "playwright": {
      "command": "npx",
      "args": ["@playwright/mcp@latest"]
    }
  }
}
"""

GEMINI_JSON = """{
  "theme": "Dracula",
  "selectedAuthType": "gemini-api-key",
  "preferredEditor": "vscode"
}
"""

VSCODE_JSONC = """{
\t// Servers for Copilot agent mode
\t"servers": {
\t\t"fetch": {
\t\t\t"type": "stdio",
\t\t\t"command": "uvx",
\t\t\t"args": ["mcp-server-fetch"],
\t\t},
\t},
\t"inputs": []
}
"""

VSCODE_JSON = '{\n\t"servers": {\n\t\t"fetch": {\n\t\t\t"type": "stdio",\n\t\t\t"command": "uvx",\n\t\t\t"args": [\n\t\t\t\t"mcp-server-fetch"\n\t\t\t]\n\t\t}\n\t},\n\t"inputs": []\n}'

WINDSURF_BROKEN = '{\n  "mcpServers": {\n    "sentry": {\n      "serverUrl": "https://mcp.sentry.dev/sse"\n'

CLAUDE_DESKTOP_JSON = """{
    "mcpServers": {
        "filesystem": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"]
        }
    },
    "globalShortcut": "Alt+Space"
}
"""


@dataclass
class FakeHome:
    home: Path
    platform: str
    files: dict[str, Path]  # agent name -> config path as the agent names it
    writable: set[str]  # agents whose config memoryd may rewrite
    untouched: set[str]  # agents whose config must stay byte-identical (unparsable / JSONC)
    dotfile: Path  # the symlink target of Cursor's config


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def build_home(root: Path, platform: str) -> FakeHome:
    home = root / "home"
    files = {
        "claude-code": _write(home / ".claude.json", CLAUDE_JSON),
        "codex": _write(home / ".codex" / "config.toml", CODEX_TOML),
        "gemini": _write(home / ".gemini" / "settings.json", GEMINI_JSON),
        "windsurf": _write(home / ".codeium" / "windsurf" / "mcp_config.json", WINDSURF_BROKEN),
    }
    _write(home / ".claude" / "settings.json", CLAUDE_SETTINGS)
    # Cursor's config is a symlink into a dotfiles checkout.
    dotfile = _write(root / "dotfiles" / "cursor" / "mcp.json", CURSOR_JSON)
    (home / ".cursor").mkdir()
    os.symlink(dotfile, home / ".cursor" / "mcp.json")
    files["cursor"] = home / ".cursor" / "mcp.json"
    untouched = {"windsurf"}
    if platform == "darwin":
        support = home / "Library" / "Application Support"
        files["vscode"] = _write(support / "Code" / "User" / "mcp.json", VSCODE_JSON)
        files["claude-desktop"] = _write(
            support / "Claude" / "claude_desktop_config.json", CLAUDE_DESKTOP_JSON
        )
    else:
        files["vscode"] = _write(home / ".config" / "Code" / "User" / "mcp.json", VSCODE_JSONC)
        untouched.add("vscode")
    writable = set(files) - untouched
    return FakeHome(home, platform, files, writable, untouched, dotfile)


@pytest.fixture(params=["linux", "darwin"])
def fake_home(request, tmp_path) -> FakeHome:
    return build_home(tmp_path, request.param)
