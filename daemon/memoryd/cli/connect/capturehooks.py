"""Capture hooks in agents' configs: which events, which file, and the pure text edits that add or remove them.

Each agent runs ``python -m memoryd_shim.hooks AGENT EVENT`` (stdlib only, talks to the daemon's socket,
exits 0 within its budget) on these events, read from each agent's hooks reference:

* **Claude Code** (``~/.claude/settings.json``, ``hooks.<Event>`` matcher groups, ``timeout`` in seconds;
  code.claude.com/docs/en/hooks): ``UserPromptSubmit`` (``prompt``), ``Stop`` (``last_assistant_message``
  since 2.1.47, else the transcript's tail), ``SessionStart`` (``hookSpecificOutput.additionalContext``),
  ``SessionEnd``, ``PreCompact``.
* **Codex CLI** (``$CODEX_HOME/hooks.json``, the same group shape, ``timeout`` in seconds;
  developers.openai.com/codex/hooks and ``codex-rs/hooks/schema``): ``UserPromptSubmit``, ``Stop``
  (``last_assistant_message``; ``{"decision":"block","reason"}`` continues the turn), ``SessionStart``,
  ``PreCompact``. Codex has no session-end event: its summary is written at compaction only.
* **Gemini CLI** (``~/.gemini/settings.json``, ``hooks.<Event>`` groups, ``timeout`` in milliseconds;
  geminicli.com/docs/hooks/reference): ``BeforeAgent`` (``prompt``), ``AfterAgent`` (``prompt_response``;
  ``{"decision":"deny","reason"}`` makes it retry with the reason), ``SessionStart``, ``SessionEnd``,
  ``PreCompress``.

A group is memoryd's when every hook in it runs ``-m memoryd_shim.hooks``; edits touch only those groups
(and the containers they create or empty, unless the one-time backup shows they existed before), and check
that the rest of the file's values are unchanged, else :class:`memoryd.cli.connect.edits.EditError`.
The digest budget (``--tokens N`` on the session-start hook) survives ``capture off``/``on`` in
``<state>/capture-budgets.json``: memoryd's own file, never the agent's.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memoryd.cli.connect import jsonedit
from memoryd.cli.connect.agents import command_words
from memoryd.cli.connect.edits import EditError, _get, lenient_json, only_hooks

HOOK_MODULE = "memoryd_shim.hooks"
EVENTS: dict[str, tuple[str, ...]] = {
    "claude-code": ("UserPromptSubmit", "Stop", "SessionStart", "SessionEnd", "PreCompact"),
    "codex": ("UserPromptSubmit", "Stop", "SessionStart", "PreCompact"),
    "gemini": ("BeforeAgent", "AfterAgent", "SessionStart", "SessionEnd", "PreCompress"),
}
#: The agent's own kill timeout for one hook run; the hook itself ends within ~2.5 s.
TIMEOUT_S = 10
START_EVENT = "SessionStart"
#: In memoryd's state folder: ``{agent: tokens}`` of hooks ``capture off`` removed, for ``capture on``.
BUDGETS_FILE = "capture-budgets.json"


def hooks_file(agent: str, folder: Path) -> Path:
    """The file holding ``agent``'s hooks, in its config ``folder`` (``~/.claude``, ``$CODEX_HOME``, ``~/.gemini``)."""
    return folder / ("hooks.json" if agent == "codex" else "settings.json")


def command(
    agent: str, event: str, python: str, tokens: int | None = None, env: Mapping[str, str] | None = None
) -> str:
    """The shell command line of one hook: ``[VAR=value ...] '<python>' -m memoryd_shim.hooks AGENT EVENT``.

    ``env``: memoryd's path variables to carry (agents run hooks with their own environment);
    ``tokens``: the digest budget, on the session-start hook only."""
    words = [f"{k}={shlex.quote(v)}" for k, v in sorted((env or {}).items())]
    words += [shlex.quote(python), "-m", HOOK_MODULE, agent, event]
    if tokens is not None and event == START_EVENT:
        words += ["--tokens", str(tokens)]
    return " ".join(words)


def is_capture_command(value: object) -> bool:
    """Whether a hook command runs memoryd's capture hook (any interpreter, any variables)."""
    words = command_words(value)
    if words is None:
        return False
    return any(words[i : i + 2] == ["-m", HOOK_MODULE] for i in range(len(words)))


def group(agent: str, event: str, cmd: str) -> dict[str, Any]:
    """memoryd's matcher group for one event, as ``agent`` spells it."""
    if agent == "gemini":
        hook = {"type": "command", "name": f"memoryd-{event}", "command": cmd, "timeout": TIMEOUT_S * 1000}
    else:
        hook = {"type": "command", "command": cmd, "timeout": TIMEOUT_S}
    return {"hooks": [hook]}


def wanted(
    agent: str, python: str, tokens: int | None = None, env: Mapping[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """``{event: group}`` memoryd installs for ``agent``."""
    return {e: group(agent, e, command(agent, e, python, tokens, env)) for e in EVENTS[agent]}


def _ours(g: Any) -> bool:
    return only_hooks(g, is_capture_command)


def read(text: str) -> dict[str, str]:
    """``{event: command}`` of memoryd's capture hooks in a config text (lenient: JSONC is read)."""
    found: dict[str, str] = {}
    hooks = _get(lenient_json(text), ("hooks",))
    for event, groups in hooks.items() if isinstance(hooks, dict) else ():
        for g in groups if isinstance(groups, list) else ():
            if _ours(g):
                found[event] = g["hooks"][0]["command"]
    return found


def _strip(value: Any) -> Any:
    """``value`` without memoryd's groups (and the event lists / ``hooks`` they leave empty)."""
    if not isinstance(value, dict) or not isinstance(value.get("hooks"), dict):
        return value
    hooks = {}
    for event, groups in value["hooks"].items():
        kept = [g for g in groups if not _ours(g)] if isinstance(groups, list) else groups
        if kept != []:
            hooks[event] = kept
    out = {k: v for k, v in value.items() if k != "hooks"}
    if hooks:
        out["hooks"] = hooks
    return out


def _check(before: Any, after: Any) -> None:
    if _strip(before) != _strip(after):
        raise EditError("the edit would change more than memoryd's hooks; file left as it was")


def set_hooks(text: str, groups: Mapping[str, dict[str, Any]]) -> str:
    """``text`` with exactly memoryd's ``groups`` (``{event: group}``); other hooks stay byte for byte."""
    doc = jsonedit.Document(text)
    before = doc.value
    hooks = _get(before, ("hooks",))
    if hooks is not None and not isinstance(hooks, dict):
        raise jsonedit.NotPlainJson("invalid", "hooks is not a JSON object")
    for event, want in groups.items():
        current = _get(doc.value, ("hooks", event))
        if current is None:
            doc.set_member(("hooks",), event, [want])
            continue
        if not isinstance(current, list):
            raise jsonedit.NotPlainJson("invalid", f"hooks.{event} is not a JSON array")
        ours = [i for i, g in enumerate(current) if _ours(g)]
        if len(ours) == 1 and current[ours[0]] == want:
            continue
        for i in reversed(ours[1:]):
            doc.remove(("hooks", event, i))
        if ours:
            doc.replace(("hooks", event, ours[0]), want)
        else:
            doc.append_item(("hooks", event), want)
    _check(before, doc.value)
    if read(doc.render()) != {e: g["hooks"][0]["command"] for e, g in groups.items()}:
        raise EditError("the hooks did not land as intended; file left as it was")
    return doc.render()


def remove_hooks(text: str, had: set[tuple[str, ...]] | None) -> str:
    """``text`` without memoryd's capture groups; emptied event lists and ``hooks`` go unless ``had``."""
    doc = jsonedit.Document(text)
    before = doc.value
    hooks = _get(before, ("hooks",))
    if not isinstance(hooks, dict):
        return text
    for event in list(hooks):
        groups = _get(doc.value, ("hooks", event))
        if not isinstance(groups, list):
            continue
        ours = [i for i, g in enumerate(groups) if _ours(g)]
        for i in reversed(ours):
            doc.remove(("hooks", event, i))
        if ours and _get(doc.value, ("hooks", event)) == [] and (had is None or ("hooks", event) not in had):
            doc.remove(("hooks", event))
    if _get(doc.value, ("hooks",)) == {} and (had is None or ("hooks",) not in had):
        doc.remove(("hooks",))
    _check(before, doc.value)
    return doc.render()


def tokens_of(commands: Mapping[str, str]) -> int | None:
    """The digest budget (``--tokens N``) of the session-start hook in ``{event: command}``, else None."""
    try:
        words = shlex.split(commands.get(START_EVENT, ""))
    except ValueError:
        return None
    at = words.index("--tokens") + 1 if "--tokens" in words else 0
    return int(words[at]) if 0 < at < len(words) and words[at].isdigit() else None


def _budgets_file() -> Path:
    from memoryd.paths import resolve

    return resolve().state / BUDGETS_FILE


def _budgets() -> dict[str, int]:
    try:
        data = json.loads(_budgets_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, int)} if isinstance(data, dict) else {}


def remembered_tokens(agent: str) -> int | None:
    """The budget ``capture off`` found in ``agent``'s hooks (for the next ``capture on``), else None."""
    return _budgets().get(agent)


def remember_tokens(agent: str, tokens: int | None) -> None:
    """Keep (``tokens`` None: forget) ``agent``'s budget in memoryd's own state folder; errors are ignored:
    losing it only means the default budget."""
    budgets = _budgets()
    if tokens is None and agent not in budgets:
        return
    if tokens is None:
        budgets.pop(agent)
    else:
        budgets[agent] = tokens
    path = _budgets_file()
    try:
        if budgets:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(budgets, sort_keys=True) + "\n", encoding="utf-8")
        else:
            path.unlink(missing_ok=True)
    except OSError:
        pass


def snippet(groups: Mapping[str, dict[str, Any]]) -> str:
    """The hooks as a config fragment to paste by hand."""
    return json.dumps({"hooks": {e: [g] for e, g in groups.items()}}, indent=2) + "\n"
