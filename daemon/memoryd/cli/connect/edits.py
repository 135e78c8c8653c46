"""Pure text edits of one agent config: memoryd's server entry and Claude Code's Stop hook.

Each function takes the file's text and returns the new text (the same text when nothing changes); the
checks at the end of each edit prove that only memoryd's entry changed (and containers it created or
emptied), otherwise :class:`EditError` is raised and nothing gets written.

A container (``mcpServers``, ``hooks.Stop``, ...) that memoryd's removal leaves empty is removed too,
unless ``had`` says it existed before memoryd's first change (read from the one-time backup).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from memoryd.cli.connect import jsonedit, tomledit
from memoryd.cli.connect.agents import SERVER_NAME, is_memoryd_hook

HOOK_EVENT = "Stop"
HOOK_TIMEOUT_S = 10
HOOKS_PATH = ("hooks", HOOK_EVENT)


class EditError(ValueError):
    """The edit would have touched more than memoryd's entry (a bug or an unexpected file shape)."""


def _get(value: Any, path: tuple[str, ...]) -> Any:
    for step in path:
        if not isinstance(value, dict):
            return None
        value = value.get(step)
    return value


def _prune(value: dict[str, Any], path: tuple[str, ...], had: set[tuple[str, ...]] | None) -> None:
    """Drop containers along ``path`` (innermost first) that are empty and not in ``had``."""
    for cut in range(len(path), 0, -1):
        node = _get(value, path[:cut])
        if node in ({}, []) and (had is None or path[:cut] not in had):
            parent = _get(value, path[: cut - 1]) if cut > 1 else value
            del parent[path[cut - 1]]
        else:
            break


def _copy_path(value: Any, path: tuple[str, ...]) -> Any:
    """``value`` with the dicts along ``path`` copied (everything else shared): cheap on big files."""
    if not isinstance(value, dict):
        return value
    top = dict(value)
    node = top
    for step in path:
        child = node.get(step)
        if not isinstance(child, dict | list):
            break
        node[step] = dict(child) if isinstance(child, dict) else list(child)
        node = node[step]
        if not isinstance(node, dict):
            break
    return top


def _strip_entry(value: Any, container: tuple[str, ...], name: str) -> Any:
    value = _copy_path(value, container)
    node = _get(value, container)
    if isinstance(node, dict):
        node.pop(name, None)
        _prune(value, container, None)
    return value


def lenient_json(text: str) -> Any:
    """The JSON value of ``text``, tolerating JSONC (for reading only); raises ``ValueError``."""
    body = text.lstrip(jsonedit.BOM)
    if not body.strip():
        return {}
    try:
        return json.loads(body)
    except ValueError:
        return json.loads(jsonedit.strip_jsonc(body))


def containers_present(text: str | None, fmt: str) -> set[tuple[str, ...]] | None:
    """Every object path in ``text`` (a backup), or ``None`` when unknown (no backup, unparsable)."""
    if text is None:
        return None
    try:
        value = tomledit.plain(tomledit.parse(text)) if fmt == "toml" else lenient_json(text)
    except ValueError:
        return None
    found: set[tuple[str, ...]] = set()

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if isinstance(node, dict):
            for key, child in node.items():
                found.add((*path, key))
                walk(child, (*path, key))

    walk(value, ())
    return found


def is_empty(text: str, fmt: str) -> bool:
    """Whether a config ``text`` holds nothing at all (``{}`` or blank JSON; blank TOML, no comment)."""
    body = text.lstrip(jsonedit.BOM).strip()
    return body == "" or (fmt == "json" and body == "{}")


# --- server entries --------------------------------------------------------------------------------------


def read_entry(text: str, fmt: str, container: tuple[str, ...]) -> Any:
    """memoryd's entry in ``text`` (lenient: JSONC is read), ``None`` when absent; raises ``ValueError``."""
    if fmt == "toml":
        return tomledit.get_entry(text, SERVER_NAME)
    node = _get(lenient_json(text), container)
    return node.get(SERVER_NAME) if isinstance(node, dict) else None


def _values(text: str, fmt: str) -> Any:
    return tomledit.plain(tomledit.parse(text)) if fmt == "toml" else jsonedit.classify(text)


def set_entry(text: str, fmt: str, container: tuple[str, ...], entry: dict[str, Any]) -> str:
    """``text`` with memoryd's entry equal to ``entry``; raises ``NotPlainJson``/``NotToml``/EditError."""
    if fmt == "toml":
        if tomledit.get_entry(text, SERVER_NAME) == entry:
            return text
        new = tomledit.set_entry(text, SERVER_NAME, entry)
    else:
        doc = jsonedit.Document(text)
        if _get(doc.value, container) is not None and not isinstance(_get(doc.value, container), dict):
            raise jsonedit.NotPlainJson("invalid", f"{'.'.join(container)} is not a JSON object")
        if _get(doc.value, (*container, SERVER_NAME)) == entry:
            return text
        doc.set_member(container, SERVER_NAME, entry)
        new = doc.render()
    before, after = _values(text, fmt), _values(new, fmt)
    if _get(after, (*container, SERVER_NAME)) != entry or _strip_entry(after, container, SERVER_NAME) != (
        _strip_entry(before, container, SERVER_NAME)
    ):
        raise EditError("the edit would change more than memoryd's entry; file left as it was")
    return new


def remove_entry(text: str, fmt: str, container: tuple[str, ...], had: set[tuple[str, ...]] | None) -> str:
    """``text`` without memoryd's entry (emptied containers pruned unless ``had`` names them)."""
    if fmt == "toml":
        if tomledit.get_entry(text, SERVER_NAME) is None:
            return text
        keep = had is not None and container in had
        new = tomledit.remove_entry(text, SERVER_NAME, keep_empty=keep)
    else:
        doc = jsonedit.Document(text)
        node = _get(doc.value, container)
        if not isinstance(node, dict) or SERVER_NAME not in node:
            return text
        doc.remove((*container, SERVER_NAME))
        for cut in range(len(container), 0, -1):
            node = _get(doc.value, container[:cut])
            if node == {} and (had is None or container[:cut] not in had):
                doc.remove(container[:cut])
            else:
                break
        new = doc.render()
    before, after = _values(text, fmt), _values(new, fmt)
    if _strip_entry(after, container, SERVER_NAME) != _strip_entry(before, container, SERVER_NAME):
        raise EditError("the edit would change more than memoryd's entry; file left as it was")
    return new


def snippet(fmt: str, container: tuple[str, ...], entry: dict[str, Any]) -> str:
    """What to paste by hand: the entry inside its container, as JSON or TOML."""
    if fmt == "toml":
        return tomledit.render_table(SERVER_NAME, entry)
    value: Any = {SERVER_NAME: entry}
    for step in reversed(container):
        value = {step: value}
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


# --- Claude Code's Stop hook -----------------------------------------------------------------------------


def hook_group(command: str) -> dict[str, Any]:
    """The ``hooks.Stop`` matcher group memoryd installs (Stop takes no matcher)."""
    return {"hooks": [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT_S}]}


def hook_snippet(command: str) -> str:
    """The Stop hook as a Claude ``settings.json`` fragment to paste."""
    return json.dumps({"hooks": {HOOK_EVENT: [hook_group(command)]}}, indent=2) + "\n"


def only_hooks(group: Any, ours: Callable[[object], bool]) -> bool:
    """Whether a matcher ``group`` (``{"hooks": [...]}``) holds hooks and only hooks whose command ``ours``."""
    hooks = group.get("hooks") if isinstance(group, dict) else None
    return (
        isinstance(hooks, list)
        and bool(hooks)
        and all(isinstance(h, dict) and ours(h.get("command")) for h in hooks)
    )


def is_memoryd_group(group: Any) -> bool:
    return only_hooks(group, is_memoryd_hook)


def read_hook(text: str) -> str | None:
    """The command of memoryd's Stop hook in a Claude settings text (lenient), or ``None``."""
    groups = _get(lenient_json(text), HOOKS_PATH)
    for group in groups if isinstance(groups, list) else []:
        if is_memoryd_group(group):
            return group["hooks"][0].get("command")
    return None


def _strip_hooks(value: Any) -> Any:
    value = _copy_path(value, HOOKS_PATH)
    groups = _get(value, HOOKS_PATH)
    if isinstance(groups, list):
        groups[:] = [g for g in groups if not is_memoryd_group(g)]
        _prune(value, HOOKS_PATH, None)
    return value


def _check_hooks(before: Any, after: Any) -> None:
    if _strip_hooks(before) != _strip_hooks(after):
        raise EditError("the edit would change more than memoryd's hook; file left as it was")


def set_hook(text: str, command: str) -> str:
    """Claude settings ``text`` with exactly one memoryd Stop hook group running ``command``."""
    doc = jsonedit.Document(text)
    before = doc.value
    groups = _get(before, HOOKS_PATH)
    wanted = hook_group(command)
    if groups is None:
        hooks = _get(before, ("hooks",))
        if hooks is not None and not isinstance(hooks, dict):
            raise jsonedit.NotPlainJson("invalid", "hooks is not a JSON object")
        doc.set_member(("hooks",), HOOK_EVENT, [wanted])
    elif not isinstance(groups, list):
        raise jsonedit.NotPlainJson("invalid", "hooks.Stop is not a JSON array")
    else:
        ours = [i for i, group in enumerate(groups) if is_memoryd_group(group)]
        if len(ours) == 1 and groups[ours[0]] == wanted:
            return text
        for i in reversed(ours[1:]):
            doc.remove((*HOOKS_PATH, i))
        if ours:
            doc.replace((*HOOKS_PATH, ours[0]), wanted)
        else:
            doc.append_item(HOOKS_PATH, wanted)
    after = doc.value
    _check_hooks(before, after)
    if [g for g in _get(after, HOOKS_PATH) if is_memoryd_group(g)] != [wanted]:
        raise EditError("the hook did not land as intended; file left as it was")
    return doc.render()


def remove_hook(text: str, had: set[tuple[str, ...]] | None) -> str:
    """Claude settings ``text`` without memoryd's Stop hook groups."""
    doc = jsonedit.Document(text)
    before = doc.value
    groups = _get(before, HOOKS_PATH)
    if not isinstance(groups, list):
        return text
    ours = [i for i, group in enumerate(groups) if is_memoryd_group(group)]
    if not ours:
        return text
    for i in reversed(ours):
        doc.remove((*HOOKS_PATH, i))
    for cut in (2, 1):
        node = _get(doc.value, HOOKS_PATH[:cut])
        if node in ({}, []) and (had is None or HOOKS_PATH[:cut] not in had):
            doc.remove(HOOKS_PATH[:cut])
        else:
            break
    _check_hooks(before, doc.value)
    return doc.render()
