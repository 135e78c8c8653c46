"""Connect, disconnect and inspect agents: read each config, compute the edit, show or write it safely.

Every function returns :class:`Outcome` records (one per file touched or considered) instead of printing,
so the CLI, ``memoryd doctor`` and the tests share them. Files that do not parse, or are JSONC, are
never written: their outcome carries the snippet to paste instead. Connect, disconnect and inspect sit in
one module (~450 lines) because each is the same read -> plan -> write walk over every agent's files.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memoryd.cli.connect import capturehooks, edits, safewrite
from memoryd.cli.connect.agents import (
    HTTP_URL_KEYS,
    Agent,
    claude_settings,
    command_exists,
    hook_command,
    installed_without_folder,
    keeping_own,
    tools_of,
    without_tools,
)
from memoryd.cli.connect.jsonedit import NotPlainJson
from memoryd.cli.connect.tomledit import NotToml
from memoryd.paths import memoryd_command

# Outcome states
CONNECTED = "connected"  # written now (new entry)
UPDATED = "updated"  # written now (an entry was there and differed, e.g. stale)
UNCHANGED = "unchanged"  # already as wanted (connect) / nothing to remove (disconnect)
REMOVED = "removed"
WOULD_CHANGE = "would change"  # --dry-run
SKIPPED = "skipped"  # unparsable or JSONC: left untouched, snippet printed
FAILED = "failed"  # the write failed or did not verify; the file holds its old content


@dataclass
class Outcome:
    agent: str
    path: Path
    state: str
    detail: str = ""
    snippet: str | None = None
    diff: str | None = None
    backup: bool = False  # a one-time backup was made by this write

    @property
    def ok(self) -> bool:
        return self.state not in (SKIPPED, FAILED)


@dataclass
class AgentStatus:
    agent: Agent
    state: str  # "connected" | "not connected" | "config unreadable" | "entry stale" | "not installed"
    detail: str = ""
    hook: str | None = None  # Claude Code only: "installed" | "missing" | "stale" | "unreadable"
    url: str | None = None  # an HTTP entry's URL (``connect --http``); None for the stdio shim


#: A ``VAR=value`` word at the start of a hook command line.
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _decode(data: bytes | None) -> str:
    return "" if data is None else data.decode("utf-8")


def _diff(path: Path, old: str, new: str) -> str:
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), f"{path} (now)", f"{path} (after)"
        )
    )


def _had(path: Path, fmt: str) -> set[tuple[str, ...]] | None:
    try:
        backup = safewrite.backup_path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return edits.containers_present(backup, fmt) or set()


def _apply(
    name: str,
    path: Path,
    fmt: str,
    change,
    check,
    dry_run: bool,
    fallback: str | None,
    action: str,
    drafts: dict[Path, str] | None = None,
) -> Outcome:
    """Read ``path``, compute ``change(text)``, then diff (dry run) or write with ``check`` on read-back.

    ``drafts`` (a dry run's): the text each file would have after this run's earlier changes; the change
    applies on top of it, and the diff shows the file now against all of them (:func:`_one_diff_per_file`).
    A removal (``action`` REMOVED) then tidies up (:func:`safewrite.after_removal`): a file memoryd
    created goes when nothing else is left in it, a backup when the file is back to its original bytes."""
    try:
        old_bytes = safewrite.read_bytes(path)
        old = _decode(old_bytes)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return Outcome(name, path, SKIPPED, f"cannot read it ({reason}); left untouched", fallback)
    drafted = dry_run and drafts is not None and path in drafts
    base = drafts[path] if drafted else old
    try:
        new = change(base)
    except (NotPlainJson, NotToml, edits.EditError) as exc:
        return Outcome(name, path, SKIPPED, f"{exc}; left untouched", fallback)
    if new == base and (old_bytes is not None or drafted or action == "remove"):
        return Outcome(name, path, UNCHANGED)
    removal = action == REMOVED
    if dry_run:
        if drafts is not None:
            drafts[path] = new
        goes = removal and edits.is_empty(new, fmt) and safewrite.created_path(path).exists()
        detail = "memoryd created this file; it would be removed" if goes else ""
        return Outcome(name, path, WOULD_CHANGE, detail, diff=_diff(path, old, new))
    try:
        backup = safewrite.write(
            path, new.encode("utf-8"), old_bytes, lambda data: data.decode("utf-8") == new and check(new)
        )
    except safewrite.WriteError as exc:
        return Outcome(name, path, FAILED, str(exc), fallback)
    if removal:
        detail = safewrite.after_removal(path, edits.is_empty(new, fmt), _holds_ours(new, fmt)) or ""
    else:
        detail = ""
    return Outcome(name, path, action, detail, backup=backup)


def _one_diff_per_file(outcomes: list[Outcome]) -> list[Outcome]:
    """A dry run's outcomes with one diff per file: the last change to a file (drafted on top of the ones
    before, :func:`_apply`) shows them all; an earlier one points at it."""
    last = {o.path: o for o in outcomes if o.diff is not None}
    for o in outcomes:
        if o.diff is not None and last[o.path] is not o:
            o.diff = None
            o.detail = "; ".join(filter(None, (o.detail, f"in the diff under {last[o.path].agent}")))
    return outcomes


#: Where any agent keeps server entries: a file memoryd created may hold its entry beside its hooks
#: (Gemini CLI's settings.json holds both).
_CONTAINERS = {"json": (("mcpServers",), ("servers",)), "toml": (("mcp_servers",),)}


def _holds_ours(text: str, fmt: str) -> bool:
    """Whether a config text still holds something of memoryd's: its server entry, the Stop hook or a
    capture hook (then a file memoryd created stays marked as memoryd's)."""
    try:
        if any(edits.read_entry(text, fmt, c) is not None for c in _CONTAINERS.get(fmt, ())):
            return True
        return fmt == "json" and (bool(capturehooks.read(text)) or edits.read_hook(text) is not None)
    except (NotPlainJson, ValueError, TypeError, AttributeError):
        return False


def connect(
    agent: Agent,
    server: dict[str, Any],
    dry_run: bool = False,
    capture: bool = True,
    tokens: int | None = None,
    entry: dict[str, Any] | None = None,
) -> list[Outcome]:
    """Add or refresh memoryd's entry in ``agent``'s config (and Claude Code's Stop hook); with ``capture``,
    the capture hooks of agents that have them (:mod:`.capturehooks`; ``tokens``: the digest budget).
    ``entry`` replaces the stdio entry made from ``server`` (an HTTP entry, ``connect --http``); the hooks
    still run ``server``'s interpreter."""
    entry = agent.entry(server) if entry is None else entry
    paste = edits.snippet(agent.fmt, agent.container, entry)
    try:
        previous = edits.read_entry(_decode(safewrite.read_bytes(agent.config)), agent.fmt, agent.container)
    except (OSError, ValueError):
        previous = None
    entry = keeping_own(entry, previous)

    def change(text: str) -> str:
        return edits.set_entry(text, agent.fmt, agent.container, entry)

    def check(text: str) -> bool:
        return edits.read_entry(text, agent.fmt, agent.container) == entry

    action = UPDATED if previous is not None else CONNECTED
    drafts: dict[Path, str] = {}  # a file changed twice (Claude's settings, Gemini's) is diffed once
    outcomes = [_apply(agent.name, agent.config, agent.fmt, change, check, dry_run, paste, action, drafts)]
    # The hook asks the agent to call save_outcome: only worth installing where the server is configured.
    if agent.name == "claude-code" and outcomes[0].ok:
        outcomes.append(_connect_hook(agent, server["command"], server.get("env"), dry_run, drafts))
    if capture and agent.name in capturehooks.EVENTS and outcomes[0].ok:
        outcomes.append(connect_capture(agent, server["command"], tokens, server.get("env"), dry_run, drafts))
    return _one_diff_per_file(outcomes)


def entry_tools(agent: Agent) -> str | None:
    """The tool groups of memoryd's entry in ``agent``'s config now (None: default, no entry, unreadable)."""
    try:
        text = _decode(safewrite.read_bytes(agent.config))
        return tools_of(edits.read_entry(text, agent.fmt, agent.container))
    except (OSError, ValueError):
        return None


def capture_outcome_name(agent: Agent) -> str:
    return f"{agent.name} (capture hooks)"


def connect_capture(
    agent: Agent,
    python: str,
    tokens: int | None,
    env: dict[str, str] | None,
    dry_run: bool = False,
    drafts: dict[Path, str] | None = None,
) -> Outcome:
    """Install (or refresh) memoryd's capture hooks for ``agent`` in its hooks file. ``tokens`` None keeps
    the budget of the hooks there now, else the one ``capture off`` remembered, else the default."""
    path = capturehooks.hooks_file(agent.name, agent.folder)
    try:
        previous = capturehooks.read(_decode(safewrite.read_bytes(path)))
    except (OSError, ValueError):
        previous = {}
    kept = None
    if tokens is None:
        kept = capturehooks.tokens_of(previous)
        if kept is None:
            kept = capturehooks.remembered_tokens(agent.name)
    groups = capturehooks.wanted(agent.name, python, tokens if kept is None else kept, env)
    commands = {e: g["hooks"][0]["command"] for e, g in groups.items()}
    done = _apply(
        capture_outcome_name(agent),
        path,
        "json",
        lambda text: capturehooks.set_hooks(text, groups),
        lambda text: capturehooks.read(text) == commands,
        dry_run,
        capturehooks.snippet(groups),
        UPDATED if previous else CONNECTED,
        drafts,
    )
    if done.state in (CONNECTED, UPDATED, UNCHANGED):
        capturehooks.remember_tokens(agent.name, None)  # the hooks hold it now
    if kept is not None and done.ok and not done.detail:
        done.detail = f"keeps --context-tokens {kept}"
    return done


def disconnect_capture(
    agent: Agent, dry_run: bool = False, remember: bool = False, drafts: dict[Path, str] | None = None
) -> Outcome | None:
    """Remove memoryd's capture hooks from ``agent``'s hooks file; None when there are none. ``remember``
    (``capture off``): keep their digest budget for the next ``capture on``."""
    if agent.name not in capturehooks.EVENTS:
        return None
    path = capturehooks.hooks_file(agent.name, agent.folder)
    try:
        found = capturehooks.read(_decode(safewrite.read_bytes(path)))
    except (OSError, ValueError):
        found = {}
        if not path.exists():
            return None
    else:
        if not found:
            return None
    had = _had(path, "json")
    done = _apply(
        capture_outcome_name(agent),
        path,
        "json",
        lambda text: capturehooks.remove_hooks(text, had),
        lambda text: not capturehooks.read(text),
        dry_run,
        None,
        REMOVED,
        drafts,
    )
    tokens = capturehooks.tokens_of(found)
    if remember and done.state == REMOVED and tokens is not None:
        capturehooks.remember_tokens(agent.name, tokens)
    return done


def capture_state(agent: Agent) -> str | None:
    """``"on"`` / ``"off"`` / ``"unreadable"`` for agents with capture hooks; None for the others."""
    if agent.name not in capturehooks.EVENTS:
        return None
    try:
        return (
            "on"
            if capturehooks.read(
                _decode(safewrite.read_bytes(capturehooks.hooks_file(agent.name, agent.folder)))
            )
            else "off"
        )
    except (OSError, ValueError):
        return "unreadable"


def _connect_hook(
    agent: Agent, python: str, env: dict[str, str] | None, dry_run: bool, drafts: dict[Path, str]
) -> Outcome:
    settings = claude_settings(agent.folder.parent)
    command = hook_command(python, env)
    paste = edits.hook_snippet(command)
    try:
        previous = edits.read_hook(_decode(safewrite.read_bytes(settings)))
    except (OSError, ValueError):
        previous = None
    return _apply(
        "claude-code (Stop hook)",
        settings,
        "json",
        lambda text: edits.set_hook(text, command),
        lambda text: edits.read_hook(text) == command,
        dry_run,
        paste,
        UPDATED if previous is not None else CONNECTED,
        drafts,
    )


def disconnect(agent: Agent, dry_run: bool = False) -> list[Outcome]:
    """Remove memoryd's entry (and Claude Code's Stop hook); everything else stays byte for byte."""
    had = _had(agent.config, agent.fmt)
    drafts: dict[Path, str] = {}  # a file changed twice is diffed once (see connect)
    try:
        present = edits.read_entry(_decode(safewrite.read_bytes(agent.config)), agent.fmt, agent.container)
    except (OSError, ValueError):
        present = True  # unreadable: let _apply report it
    outcomes = (
        []
        if present is None
        else [
            _apply(
                agent.name,
                agent.config,
                agent.fmt,
                lambda text: edits.remove_entry(text, agent.fmt, agent.container, had),
                lambda text: edits.read_entry(text, agent.fmt, agent.container) is None,
                dry_run,
                None,
                REMOVED,
                drafts,
            )
        ]
    )
    capture = disconnect_capture(agent, dry_run, drafts=drafts)
    if capture is not None:
        outcomes.append(capture)
    if agent.name == "claude-code":
        settings = claude_settings(agent.folder.parent)
        try:
            hooked = edits.read_hook(_decode(safewrite.read_bytes(settings))) is not None
        except (OSError, ValueError):
            hooked = settings.exists()
        if hooked:
            had_hooks = _had(settings, "json")
            outcomes.append(
                _apply(
                    "claude-code (Stop hook)",
                    settings,
                    "json",
                    lambda text: edits.remove_hook(text, had_hooks),
                    lambda text: edits.read_hook(text) is None,
                    dry_run,
                    None,
                    REMOVED,
                    drafts,
                )
            )
    return _one_diff_per_file(outcomes)


def http_url(entry: Any) -> str | None:
    """The URL of an HTTP entry (any agent's spelling), or ``None`` for a stdio entry or none."""
    if not isinstance(entry, dict) or "command" in entry:
        return None
    return next((entry[k] for k in HTTP_URL_KEYS if isinstance(entry.get(k), str)), None)


def _entry_state(entry: Any, wanted: dict[str, Any] | None) -> tuple[str, str]:
    if entry is None:
        return "not connected", ""
    url = http_url(entry)
    if url is not None:
        return "connected", f"over HTTP, {url.split('?')[0]}"
    command = entry.get("command") if isinstance(entry, dict) else None
    if not command_exists(command):
        return "entry stale", f"{command!r} no longer exists; `{memoryd_command()} connect` fixes it"
    args = entry.get("args") if isinstance(entry.get("args"), list) else []
    script = next((a for a in args if isinstance(a, str) and a.endswith(".py")), None)
    if script is not None and not os.path.isfile(script):
        return "entry stale", f"{script!r} no longer exists; `{memoryd_command()} connect` fixes it"
    # The tool groups are the user's choice (`connect --tools`), not a sign of another install.
    if wanted is not None and without_tools(entry) != without_tools(keeping_own(wanted, entry)):
        return (
            "connected",
            f"through {command} (differs from this install; `{memoryd_command()} connect` updates it)",
        )
    groups = tools_of(entry)
    return "connected", f"tools {groups}" if groups else ""


def no_folder_yet(agent: Agent) -> str:
    """What to say of an agent whose CLI is installed but has made no config folder yet."""
    return f"installed, no config folder yet ({agent.folder}): `{memoryd_command()} connect {agent.name}` creates it"


def status(agent: Agent, server: dict[str, Any] | None = None) -> AgentStatus:
    """How ``agent`` is connected now (``server``: the entry this install would write, for comparison)."""
    wanted = agent.entry(server) if server is not None else None
    if installed_without_folder(agent):
        return AgentStatus(agent, "not connected", no_folder_yet(agent))
    if not agent.folder.exists() and not agent.config.exists():
        return AgentStatus(agent, "not installed", f"no {agent.folder}")
    try:
        text = _decode(safewrite.read_bytes(agent.config))
        entry = edits.read_entry(text, agent.fmt, agent.container)
    except (OSError, ValueError) as exc:
        return AgentStatus(agent, "config unreadable", str(exc))
    state, detail = _entry_state(entry, wanted)
    result = AgentStatus(agent, state, detail, url=http_url(entry))
    if agent.name == "claude-code":
        result.hook = _hook_state(claude_settings(agent.folder.parent))
    return result


def _hook_state(settings: Path) -> str:
    try:
        text = _decode(safewrite.read_bytes(settings))
        command = edits.read_hook(text)
    except (OSError, ValueError):
        return "unreadable"
    if command is None:
        return "missing"
    try:
        words = shlex.split(command)
    except ValueError:
        return "stale"
    # the interpreter is the first word that is not a VAR=value the command line starts with
    python = next((w for w in words if not _ASSIGNMENT.match(w)), None)
    return "installed" if python and command_exists(python) else "stale"
