"""The coding agents ``memoryd connect`` knows: where each keeps its user-level MCP config and how it
spells the server entry, plus the entry itself.

Sources (each checked against the agent's public docs when this table was written):

* Claude Code: ``~/.claude.json``, top-level ``mcpServers`` (user scope; ``claude mcp add --scope user``
  writes it, with ``"type": "stdio"``); hooks in ``~/.claude/settings.json`` (code.claude.com/docs/en/mcp,
  /docs/en/hooks).
* Codex CLI: ``$CODEX_HOME/config.toml`` (default ``~/.codex``), ``[mcp_servers.<name>]`` with ``command``,
  ``args``, ``env`` (developers.openai.com/codex/mcp, openai/codex docs/config.md).
* Cursor: ``~/.cursor/mcp.json``, ``mcpServers`` (cursor.com/docs/mcp).
* Gemini CLI: ``~/.gemini/settings.json``, ``mcpServers`` (geminicli.com/docs/tools/mcp-server).
* VS Code: the user profile's ``mcp.json``, top-level ``servers``, ``"type": "stdio"``
  (code.visualstudio.com/docs/agents/reference/mcp-configuration); the profile folder is
  ``~/Library/Application Support/Code/User`` on macOS and ``$XDG_CONFIG_HOME/Code/User`` on Linux.
* Windsurf: ``~/.codeium/windsurf/mcp_config.json``, ``mcpServers`` (docs.windsurf.com/windsurf/cascade/mcp).
* Claude Desktop: ``~/Library/Application Support/Claude/claude_desktop_config.json``, ``mcpServers``
  (modelcontextprotocol.io quickstart; the docs name macOS and Windows only, so no Linux path here).

HTTP entries (``memoryd connect --http``: the daemon's ``/mcp`` URL and an ``Authorization: Bearer`` header):
Claude Code ``{"type": "http", "url", "headers"}`` (``claude mcp add --transport http``), VS Code the same
shape, Cursor ``{"url", "headers"}``, Gemini CLI ``{"httpUrl", "headers"}``, Windsurf ``{"serverUrl",
"headers"}``, Codex ``url`` + ``http_headers`` (a static header table; ``bearer_token`` inline is not
accepted there). Claude Desktop's file takes stdio servers only (remote ones are added in its UI), so it
keeps the stdio entry.

Antigravity is left out: public sources disagree on its file (``~/.gemini/antigravity/mcp_config.json`` vs
``~/.gemini/config/mcp_config.json``); ``memoryd connect --print`` gives the ``mcpServers`` snippet for it.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import memoryd_shim
from memoryd.paths import interpreter
from memoryd_shim import rendezvous

SERVER_NAME = "memoryd"
#: The shim's ``__main__.py`` run as a file with ``-S``: no runpy and no site-packages scan, the quickest
#: start the interpreter allows (it puts its own package folder on the path; standard library only).
SHIM_MAIN = str(Path(memoryd_shim.__file__).resolve().with_name("__main__.py"))
#: memoryd's own path variables, carried into the entry when set, so the agent's shim finds the same daemon.
PATH_VARIABLES = ("MEMORYD_HOME", "MEMORYD_BOARD", "MEMORYD_INDEX", "MEMORYD_MODELS", "MEMORYD_SOCKET")
HOOK_ARGS = ("-m", "memoryd", "hook", "claude-stop")


@dataclass(frozen=True)
class Agent:
    """One agent: its CLI name, config file, the file's format and where the server entries live."""

    name: str
    title: str
    folder: Path  # the agent's config folder: it "is installed" when this exists
    config: Path
    fmt: str  # "json" | "toml"
    container: tuple[str, ...]  # path of the object holding server entries
    stdio_type: bool = False  # entries carry "type": "stdio"
    http: str | None = None  # how an HTTP entry is spelled (a key of HTTP_SHAPES); None: stdio only

    def entry(self, server: dict[str, Any]) -> dict[str, Any]:
        """The entry as this agent spells it (``server`` from :func:`server_entry`)."""
        return {"type": "stdio", **server} if self.stdio_type else dict(server)

    def http_entry(self, url: str, token: str) -> dict[str, Any] | None:
        """The HTTP entry for ``url`` with the bearer ``token``, or ``None`` when the agent's config file
        takes no HTTP servers."""
        return (
            None if self.http is None else HTTP_SHAPES[self.http](url, {"Authorization": f"Bearer {token}"})
        )


#: How each agent spells an HTTP server entry (module docstring).
HTTP_SHAPES = {
    "type": lambda url, headers: {"type": "http", "url": url, "headers": headers},
    "url": lambda url, headers: {"url": url, "headers": headers},
    "httpUrl": lambda url, headers: {"httpUrl": url, "headers": headers},
    "serverUrl": lambda url, headers: {"serverUrl": url, "headers": headers},
    "codex": lambda url, headers: {"url": url, "http_headers": headers},
}
#: The keys that make an entry an HTTP one, in any agent's spelling.
HTTP_URL_KEYS = ("url", "httpUrl", "serverUrl")


#: The keys of memoryd's entry that connect writes, in any agent's stdio or HTTP spelling. Any other key of
#: an entry already there (a start-up timeout, tool approvals) is the user's or the agent's, and is kept.
MANAGED_KEYS = frozenset({"type", "command", "args", "env", "headers", "http_headers", *HTTP_URL_KEYS})


def keeping_own(entry: dict[str, Any], previous: Any) -> dict[str, Any]:
    """``entry`` plus what ``previous`` (memoryd's entry there now) holds that connect does not manage: its
    other keys, and (stdio) its env variables other than memoryd's own ``MEMORYD_*``."""
    if not isinstance(previous, dict):
        return entry
    out = dict(entry)
    out.update((k, v) for k, v in previous.items() if k not in MANAGED_KEYS and k not in entry)
    env = previous.get("env")
    own = {k: v for k, v in env.items() if not k.startswith("MEMORYD_")} if isinstance(env, dict) else {}
    if own and "command" in entry:
        out["env"] = {**own, **entry.get("env", {})}
    return out


def _xdg_config(home: Path, env: Mapping[str, str]) -> Path:
    value = env.get("XDG_CONFIG_HOME")
    return Path(value) if value and os.path.isabs(value) else home / ".config"


def known_agents(
    home: Path | None = None, platform: str | None = None, env: Mapping[str, str] | None = None
) -> list[Agent]:
    """Every agent with a config location on ``platform`` (``sys.platform`` style), under ``home``."""
    env = os.environ if env is None else env
    home = Path(home) if home is not None else Path(env.get("HOME") or Path.home())
    platform = platform or sys.platform
    mac = platform == "darwin"
    app_support = home / "Library" / "Application Support"
    codex_home = Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else home / ".codex"
    vscode_user = (app_support if mac else _xdg_config(home, env)) / "Code" / "User"
    agents = [
        Agent(
            "claude-code",
            "Claude Code",
            home / ".claude",
            home / ".claude.json",
            "json",
            ("mcpServers",),
            True,
            http="type",
        ),
        Agent(
            "codex",
            "Codex CLI",
            codex_home,
            codex_home / "config.toml",
            "toml",
            ("mcp_servers",),
            http="codex",
        ),
        Agent(
            "cursor",
            "Cursor",
            home / ".cursor",
            home / ".cursor" / "mcp.json",
            "json",
            ("mcpServers",),
            http="url",
        ),
        Agent(
            "gemini",
            "Gemini CLI",
            home / ".gemini",
            home / ".gemini" / "settings.json",
            "json",
            ("mcpServers",),
            http="httpUrl",
        ),
        Agent("vscode", "VS Code", vscode_user, vscode_user / "mcp.json", "json", ("servers",), True, "type"),
        Agent(
            "windsurf",
            "Windsurf",
            home / ".codeium" / "windsurf",
            home / ".codeium" / "windsurf" / "mcp_config.json",
            "json",
            ("mcpServers",),
            http="serverUrl",
        ),
    ]
    if mac:
        claude = app_support / "Claude"
        agents.append(
            Agent(
                "claude-desktop",
                "Claude Desktop",
                claude,
                claude / "claude_desktop_config.json",
                "json",
                ("mcpServers",),
            )
        )
    return agents


def claude_settings(home: Path) -> Path:
    """Claude Code's user settings file, where hooks live."""
    return home / ".claude" / "settings.json"


def server_entry(
    tools: str | None = None, python: str | None = None, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """``{"command": <python>, "args": ["-S", "<...>/memoryd_shim/__main__.py", ...], "env"?: {...}}``.

    ``tools`` is a ``--tools`` value (checked with :func:`memoryd_shim.rendezvous.parse_tool_groups`;
    raises ``ValueError``). ``env`` carries memoryd's path variables that are set now, made absolute.
    """
    args = ["-S", SHIM_MAIN]
    if tools:
        rendezvous.parse_tool_groups(tools)
        args += ["--tools", ",".join(part.strip() for part in tools.split(",") if part.strip())]
    entry: dict[str, Any] = {"command": python or interpreter(), "args": args}
    source = os.environ if env is None else env
    carried = {
        name: os.path.abspath(os.path.expanduser(source[name])) for name in PATH_VARIABLES if source.get(name)
    }
    if carried:
        entry["env"] = carried
    return entry


def tools_of(entry: Any) -> str | None:
    """The tool groups an existing entry names (``"all"``, ``"briefs,memo"``), or None for the default:
    the shim's ``--tools`` argument of a stdio entry, the ``tools`` query of an HTTP entry's URL."""
    if not isinstance(entry, dict):
        return None
    args = entry.get("args")
    if isinstance(args, list) and any(_tools_arg(a) for a in args):
        value = None  # as the shim reads them: ``--tools X`` or ``--tools=X``, the last one counts
        for i, arg in enumerate(args):
            if arg == "--tools":
                value = args[i + 1] if i + 1 < len(args) else None
            elif _tools_arg(arg):
                value = arg.partition("=")[2]
        return value if isinstance(value, str) and value else None
    url = next((entry[k] for k in HTTP_URL_KEYS if isinstance(entry.get(k), str)), None)
    if url is None:
        return None
    values = parse_qs(urlsplit(url).query).get("tools")
    return values[0] if values and values[0] else None


def without_tools(entry: Any) -> Any:
    """``entry`` with the shim's ``--tools`` argument taken out (for comparing installs, not groups)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("args"), list):
        return entry
    args, out = entry["args"], []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--tools":
            skip = True
        elif not _tools_arg(arg):
            out.append(arg)
    return {**entry, "args": out}


def _tools_arg(arg: object) -> bool:
    """Whether a shim argument names tool groups: ``--tools`` (its value follows) or ``--tools=...``."""
    return isinstance(arg, str) and (arg == "--tools" or arg.startswith("--tools="))


def hook_command(python: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """The Stop hook's shell command line: ``[VAR=value ...] '<python>' -m memoryd hook claude-stop``;
    ``env``: memoryd's path variables the MCP entry carries (the hook must find the same board)."""
    words = [f"{k}={shlex.quote(v)}" for k, v in sorted((env or {}).items())]
    return " ".join([*words, *(shlex.quote(part) for part in (python or interpreter(), *HOOK_ARGS))])


def command_words(command: object) -> list[str] | None:
    """A hook's ``command`` string split as the shell would; None for anything else (a broken quote)."""
    if not isinstance(command, str):
        return None
    try:
        return shlex.split(command)
    except ValueError:
        return None


def is_memoryd_hook(command: object) -> bool:
    """Whether a hook ``command`` string is memoryd's Stop hook (any interpreter)."""
    words = command_words(command)
    if words is None:
        return False
    return tuple(words[1:]) == HOOK_ARGS or tuple(words[-3:]) == ("memoryd", "hook", "claude-stop")


#: The command each agent's CLI is started by, where it has one: installed when on PATH, even before it
#: has made its config folder (Codex makes ``~/.codex`` only when first run).
CLI_COMMANDS = {"claude-code": "claude", "codex": "codex", "gemini": "gemini"}


def installed_without_folder(agent: Agent) -> bool:
    """Whether ``agent``'s CLI is on PATH while neither its config folder nor its config file exists."""
    from shutil import which

    cli = CLI_COMMANDS.get(agent.name)
    return (
        cli is not None and not agent.folder.exists() and not agent.config.exists() and which(cli) is not None
    )


def command_exists(command: object) -> bool:
    """Whether an entry's ``command`` names an existing executable (absolute) or is found on PATH."""
    if not isinstance(command, str) or not command:
        return False
    if os.path.isabs(command):
        return os.access(command, os.X_OK)
    from shutil import which

    return which(command) is not None
