"""Text no layer can store: a lone UTF-16 surrogate (``"\\ud800"`` is valid JSON, but no Unicode text, and
nothing downstream can encode it as UTF-8). The tool boundary refuses such arguments before any tool runs
(:meth:`memoryd.tools.registry.RegisteredTool.check_arguments`); file formats and importers ask the same
question of what they read. Capture, which must keep what was typed, mends such text instead
(:func:`without_lone_surrogates`): each lone surrogate becomes U+FFFD, with the hooks' own rule.
"""

from __future__ import annotations

from typing import Any

from memoryd_shim.textrules import replace_lone_surrogates


def has_lone_surrogate(text: str) -> bool:
    """True when ``text`` cannot be encoded as UTF-8 (it holds a lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def first_lone_surrogate(value: Any, where: str = "") -> str | None:
    """``"<path>: contains a lone UTF-16 surrogate, not Unicode text"`` for the first string (a key or a
    value, at any depth of dicts and lists) that holds one; None when all are text."""
    if isinstance(value, str):
        return (
            f"{where or '(arguments)'}: contains a lone UTF-16 surrogate, not Unicode text"
            if has_lone_surrogate(value)
            else None
        )
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        path = f"{where}/{key}" if where else str(key)
        if isinstance(key, str) and (problem := first_lone_surrogate(key, where or "(arguments)")):
            return problem
        if problem := first_lone_surrogate(item, path):
            return problem
    return None


def without_lone_surrogates(value: Any) -> Any:
    """``value`` (a JSON value) with every string, keys included, passed through
    :func:`memoryd_shim.textrules.replace_lone_surrogates` (U+FFFD for each lone surrogate)."""
    if isinstance(value, str):
        return replace_lone_surrogates(value)
    if isinstance(value, dict):
        return {without_lone_surrogates(k): without_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_lone_surrogates(v) for v in value]
    return value
