"""Edit one member of a JSON file in place, leaving every other byte as it was.

The standard ``json`` module validates the text and gives the values; a small scanner over the (already
valid) text gives each value's span, so an edit is a splice: a member is inserted after the last member of
its object (or an item after the last item of its array), replaced in its span, or cut out together with
its separating comma. Inserting and then removing the same member gives back the original text.

New text follows the file's own layout: the indentation of the sibling members (or of the container plus
the file's indent unit), the file's ``":"`` spacing, and one line for files written on one line.

Files with ``//`` or ``/* */`` comments or trailing commas (JSONC, as VS Code writes) are *not* rewritten:
:func:`classify` reports them so the caller prints the snippet instead.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

BOM = "\ufeff"


class NotPlainJson(ValueError):
    """The text is JSON with comments/trailing commas (``kind="jsonc"``) or not JSON at all (``"invalid"``)."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


@dataclass
class Node:
    """A JSON value's span ``text[start:end]``; objects keep ``keys`` (key start offsets) and ``children``."""

    kind: str  # "object" | "array" | "scalar"
    start: int
    end: int = 0
    keys: list[str] = field(default_factory=list)
    key_starts: list[int] = field(default_factory=list)
    children: list[Node] = field(default_factory=list)
    expanded: bool = False

    def member(self, key: str) -> Node | None:
        # Python's json keeps the last of duplicate keys; so do we.
        for name, child in zip(reversed(self.keys), reversed(self.children), strict=True):
            if name == key:
                return child
        return None


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


_WS_RUN = re.compile(r"[ \t\r\n]*")


def _skip_ws(text: str, i: int) -> int:
    return _WS_RUN.match(text, i).end()  # type: ignore[union-attr]  # "*" always matches


_DECODER = json.JSONDecoder()
_KINDS = {"{": "object", "[": "array"}


def _span(text: str, i: int) -> Node:
    """The value starting at or after ``i``, children not yet listed (its end found by the C decoder)."""
    i = _skip_ws(text, i)
    return Node(_KINDS.get(text[i], "scalar"), i, _DECODER.raw_decode(text, i)[1])


def _expand(text: str, node: Node) -> Node:
    """List ``node``'s members (objects) or items (arrays) with their spans, once."""
    if node.kind == "scalar" or node.expanded:
        return node
    node.expanded = True
    close = "}" if node.kind == "object" else "]"
    i = _skip_ws(text, node.start + 1)
    if text[i] == close:
        return node
    while True:
        if node.kind == "object":
            m = _STRING.match(text, i)
            assert m is not None  # the text was validated by json.loads
            node.keys.append(json.loads(m.group()))
            node.key_starts.append(i)
            i = _skip_ws(text, m.end()) + 1  # after ":"
        child = _span(text, i)
        node.children.append(child)
        i = _skip_ws(text, child.end)
        if text[i] == close:
            return node
        i = _skip_ws(text, i + 1)  # after ","


def strip_jsonc(text: str) -> str:
    """``text`` without ``//``/``/* */`` comments and trailing commas (strings left intact)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            m = _STRING.match(text, i)
            end = m.end() if m else n
            out.append(text[i:end])
            i = end
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            out.append(ch)
            i += 1
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out))


def classify(text: str) -> Any:
    """Parse ``text`` as plain JSON and return the value; raise :class:`NotPlainJson` otherwise.

    An empty (or whitespace-only) file counts as ``{}``. A leading byte-order mark is allowed.
    """
    body = text[1:] if text.startswith(BOM) else text
    if not body.strip():
        return {}
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:
        detail = str(exc)
    try:
        json.loads(strip_jsonc(body))
    except (ValueError, RecursionError):
        raise NotPlainJson("invalid", f"not valid JSON ({detail})") from None
    raise NotPlainJson("jsonc", "has comments or trailing commas (JSONC), so memoryd does not rewrite it")


class Document:
    """A plain-JSON text with an object at its root, edited by splices (see the module docstring)."""

    def __init__(self, text: str) -> None:
        value = classify(text)
        if not isinstance(value, dict):
            raise NotPlainJson("invalid", f"the top level is a JSON {type(value).__name__}, not an object")
        self.prefix = BOM if text.startswith(BOM) else ""
        body = text[len(self.prefix) :]
        if not body.strip():
            body = "{}\n"
        self.text = body
        self.value = value
        self.nl = "\r\n" if "\r\n" in body else "\n"
        self._tree: Node | None = None

    def render(self) -> str:
        return self.prefix + self.text

    # --- layout ----------------------------------------------------------------------------------------

    def _root(self) -> Node:
        if self._tree is None:
            self._tree = _expand(self.text, _span(self.text, 0))
        return self._tree

    def _line_indent(self, offset: int) -> str:
        line_start = self.text.rfind("\n", 0, offset) + 1
        j = line_start
        while j < offset and self.text[j] in " \t":
            j += 1
        return self.text[line_start:j]

    def _multiline(self) -> bool:
        root = self._root()
        return "\n" in self.text[root.start : root.end] or len(self.text[root.start : root.end]) <= 2

    def _unit(self) -> str:
        """The file's indent unit: the first member's indentation under the root (default two spaces)."""
        root = self._root()
        if root.key_starts:
            indent = self._line_indent(root.key_starts[0])
            if indent and "\n" in self.text[root.start : root.key_starts[0]]:
                return indent
        return "  "

    def _colon(self) -> str:
        root = self._root()
        if root.key_starts:
            m = _STRING.match(self.text, root.key_starts[0])
            assert m is not None
            colon = self.text[m.end() : root.children[0].start]
            return colon.strip("\r\n") or ":"
        return ": "

    def _dump(self, value: Any, indent: str) -> str:
        if not self._multiline():
            return json.dumps(value, ensure_ascii=False, separators=(", ", self._colon()))
        unit = self._unit()
        rendered = json.dumps(value, ensure_ascii=False, indent=unit)
        return rendered.replace("\n", self.nl + indent)

    def _child_indent(self, container: Node) -> str:
        if container.kind == "object" and container.key_starts:
            return self._line_indent(container.key_starts[0])
        if container.kind == "array" and container.children:
            return self._line_indent(container.children[0].start)
        return self._line_indent(container.start) + self._unit()

    # --- navigation ------------------------------------------------------------------------------------

    def node(self, path: tuple[str | int, ...]) -> Node | None:
        """The node at ``path`` (object keys and array indexes), or ``None``."""
        node: Node | None = self._root()
        for step in path:
            if node is None:
                return None
            _expand(self.text, node)
            if isinstance(step, int):
                node = (
                    node.children[step] if node.kind == "array" and 0 <= step < len(node.children) else None
                )
            else:
                node = node.member(step) if node.kind == "object" else None
        return _expand(self.text, node) if node is not None else None

    def _splice(self, start: int, end: int, new: str) -> None:
        self.text = self.text[:start] + new + self.text[end:]
        self.value = json.loads(self.text)
        self._tree = None

    # --- edits -----------------------------------------------------------------------------------------

    def set_member(self, path: tuple[str | int, ...], key: str, value: Any) -> None:
        """Set ``key`` of the object at ``path`` to ``value`` (creating missing objects on the way)."""
        container = self.node(path)
        if container is None:
            # Create the missing tail as one nested value under the deepest existing object.
            for cut in range(len(path) - 1, -1, -1):
                parent = self.node(path[:cut])
                if parent is not None:
                    nested: Any = {key: value}
                    for step in reversed(path[cut + 1 :]):
                        nested = {step: nested}
                    return self.set_member(path[:cut], str(path[cut]), nested)
            raise ValueError("no root object")
        if container.kind != "object":
            raise NotPlainJson("invalid", f"{'/'.join(map(str, path))} is not a JSON object")
        existing = container.member(key)
        if existing is not None:
            indent = self._line_indent(container.key_starts[container.children.index(existing)])
            self._splice(existing.start, existing.end, self._dump(value, indent))
            return
        self._insert(container, json.dumps(key, ensure_ascii=False) + self._colon() + "{value}", value)

    def append_item(self, path: tuple[str | int, ...], value: Any) -> None:
        """Append ``value`` to the array at ``path``."""
        container = self.node(path)
        if container is None or container.kind != "array":
            raise NotPlainJson("invalid", f"{'/'.join(map(str, path))} is not a JSON array")
        self._insert(container, "{value}", value)

    def replace(self, path: tuple[str | int, ...], value: Any) -> None:
        """Replace the value at ``path`` (which must exist)."""
        node = self.node(path)
        if node is None:
            raise KeyError(path)
        self._splice(node.start, node.end, self._dump(value, self._line_indent(node.start)))

    def _insert(self, container: Node, template: str, value: Any) -> None:
        multiline = self._multiline()
        indent = self._child_indent(container)
        item = template.replace("{value}", self._dump(value, indent), 1)
        if container.children:
            last = container.children[-1]
            sep = "," + self.nl + indent if multiline else ", "
            self._splice(last.end, last.end, sep + item)
        else:
            closing = self._line_indent(container.start) if multiline else ""
            inner = self.nl + indent + item + self.nl + closing if multiline else item
            self._splice(container.start + 1, container.end - 1, inner)

    def remove(self, path: tuple[str | int, ...]) -> None:
        """Remove the member/item at ``path`` together with its separating comma."""
        *parent_path, last_step = path
        parent = self.node(tuple(parent_path))
        if parent is None:
            raise KeyError(path)
        if parent.kind == "object":
            if not isinstance(last_step, str) or parent.member(last_step) is None:
                raise KeyError(path)
            idx = len(parent.keys) - 1 - parent.keys[::-1].index(last_step)
            starts = parent.key_starts
        else:
            if not isinstance(last_step, int) or not 0 <= last_step < len(parent.children):
                raise KeyError(path)
            idx = last_step
            starts = [child.start for child in parent.children]
        children = parent.children
        if len(children) == 1:
            self._splice(parent.start + 1, parent.end - 1, "")
        elif idx > 0:
            self._splice(children[idx - 1].end, children[idx].end, "")
        else:
            self._splice(starts[0], starts[1], "")
