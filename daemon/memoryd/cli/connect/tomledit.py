"""Edit ``[mcp_servers.<name>]`` in a Codex ``config.toml`` with tomlkit, so comments and layout survive.

A new entry is appended as its own table at the end of the file, and removing an entry that still reads as
memoryd wrote it cuts exactly that text again, so connect + disconnect give back the original bytes. Any
other case (an entry written by hand or by ``codex mcp add``, a stale entry) goes through tomlkit's
document model, which keeps every other line, comment and blank line as it was; an entry already there as a
table is changed key by key, so the comments a person wrote inside it stay too.
"""

from __future__ import annotations

from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError

SERVERS = "mcp_servers"


class NotToml(ValueError):
    """The file does not parse as TOML, or ``mcp_servers`` is not a table."""


def parse(text: str) -> tomlkit.TOMLDocument:
    """``tomlkit.parse`` with its errors as :class:`NotToml`."""
    try:
        return tomlkit.parse(text)
    except (TOMLKitError, ValueError) as exc:
        raise NotToml(f"not valid TOML ({exc})") from None


def plain(doc: tomlkit.TOMLDocument) -> dict[str, Any]:
    """The document as plain Python values."""
    return doc.unwrap()


def get_entry(text: str, name: str) -> dict[str, Any] | None:
    """``mcp_servers.<name>`` as plain values, ``None`` when absent; raises :class:`NotToml`."""
    servers = plain(parse(text)).get(SERVERS)
    if servers is None:
        return None
    if not isinstance(servers, dict):
        raise NotToml(f"{SERVERS} is not a table")
    entry = servers.get(name)
    return entry if isinstance(entry, dict) or entry is None else {"<not a table>": entry}


def render_table(name: str, entry: dict[str, Any]) -> str:
    """``[mcp_servers.<name>]`` with ``entry``'s keys, as tomlkit writes it (ends with a newline)."""
    doc = tomlkit.document()
    servers = tomlkit.table(is_super_table=True)
    servers[name] = _table(entry)
    doc[SERVERS] = servers
    return tomlkit.dumps(doc)


def _table(entry: dict[str, Any]) -> tomlkit.items.Table:
    table = tomlkit.table()
    for key, value in entry.items():
        table[key] = value
    return table


def _inline(entry: dict[str, Any]) -> tomlkit.items.InlineTable:
    table = tomlkit.inline_table()
    table.update(entry)  # nested tables (env) become inline ones
    return table


def _without(value: dict[str, Any], name: str) -> dict[str, Any]:
    out = dict(value)
    servers = dict(out.get(SERVERS) or {})
    servers.pop(name, None)
    if servers:
        out[SERVERS] = servers
    else:
        out.pop(SERVERS, None)
    return out


def set_entry(text: str, name: str, entry: dict[str, Any]) -> str:
    """``text`` with ``mcp_servers.<name>`` set to ``entry``; raises :class:`NotToml`."""
    doc = parse(text)
    before = plain(doc)
    if not isinstance(before.get(SERVERS, {}), dict):
        raise NotToml(f"{SERVERS} is not a table")
    if name not in before.get(SERVERS, {}):
        sep = ("" if text.endswith("\n") else "\n") + "\n" if text.strip() else ""
        candidate = text + sep + render_table(name, entry)
        try:
            after = plain(parse(candidate))
        except NotToml:
            after = None
        if (
            after is not None
            and after.get(SERVERS, {}).get(name) == entry
            and _without(after, name) == before
        ):
            return candidate
    servers = doc.get(SERVERS)
    if servers is None:
        doc[SERVERS] = tomlkit.table(is_super_table=True)
        servers = doc[SERVERS]
    # ``mcp_servers = { ... }`` takes no table: the entry is written inline there too
    inline = isinstance(servers, tomlkit.items.InlineTable)
    existing = servers.get(name)
    if isinstance(existing, tomlkit.items.Table):
        _update(existing, entry)  # in place: the comments inside the entry's table stay
    else:
        servers[name] = _inline(entry) if inline else _table(entry)
    return tomlkit.dumps(doc)


def _update(table: tomlkit.items.Table, entry: dict[str, Any]) -> None:
    """Make ``table`` hold ``entry``'s keys and values, leaving its comment lines and the comment after an
    unchanged or changed value where they are (a nested table, such as ``env``, likewise)."""
    for key in [k for k in table if k not in entry]:
        del table[key]
    for key, value in entry.items():
        old = table.get(key)
        if isinstance(value, dict) and isinstance(old, tomlkit.items.Table):
            _update(old, value)
        elif old is None or old.unwrap() != value:
            table[key] = value
            if old is not None and old.trivia.comment:
                table[key].trivia.comment_ws, table[key].trivia.comment = (
                    old.trivia.comment_ws,
                    old.trivia.comment,
                )


def remove_entry(text: str, name: str, keep_empty: bool) -> str:
    """``text`` without ``mcp_servers.<name>``; ``keep_empty`` keeps an emptied ``mcp_servers`` table."""
    doc = parse(text)
    before = plain(doc)
    entry = (before.get(SERVERS) or {}).get(name)
    if entry is None:
        return text
    block = render_table(name, entry)
    for tail in ("\n" + block, block):
        if text.endswith(tail):
            candidate = text[: len(text) - len(tail)]
            try:
                if _without(before, name) == plain(parse(candidate)):
                    return candidate
            except NotToml:
                pass
    servers = doc[SERVERS]
    del servers[name]
    if not keep_empty and len(servers) == 0:
        del doc[SERVERS]
    return tomlkit.dumps(doc)
