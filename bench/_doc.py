"""docs/benchmarks.md as generated blocks among hand-written text (what ``bench/run_all.py`` writes).

A run replaces only the blocks it measured; everything else in the file stays byte for byte:

    <!-- bench:summary -->   date, machine, load, the targets table   <!-- /bench:summary -->
    <!-- bench:NAME -->      one benchmark's section                   <!-- /bench:NAME -->

Hand-written analysis (profiles, before/after comparisons) lives outside the markers, so ``make bench``
never loses it. A block the file does not hold yet is added before the ``how`` block (or at the end).
The targets table keeps the rows of benchmarks this run did not measure, marked with their own date.
"""

from __future__ import annotations

import re

_BLOCK = re.compile(r"<!-- bench:(?P<name>[\w-]+) -->\n(?P<body>.*?)<!-- /bench:(?P=name) -->\n?", re.S)
_TARGET_ROW = re.compile(r"^\| (?P<name>[\w-]+) \| ")


def block(name: str, body: str) -> str:
    """``body`` wrapped in the markers of block ``name`` (the body ends with one newline)."""
    return f"<!-- bench:{name} -->\n{body.rstrip()}\n<!-- /bench:{name} -->\n"


def blocks(text: str) -> dict[str, str]:
    """``{name: body}`` of every generated block in ``text``."""
    return {m["name"]: m["body"] for m in _BLOCK.finditer(text)}


def kept_target_rows(old_summary: str, measured: set[str]) -> list[str]:
    """The targets-table rows of an earlier summary for benchmarks not in ``measured``."""
    return [
        line
        for line in old_summary.splitlines()
        if (m := _TARGET_ROW.match(line)) and m["name"] not in measured and m["name"] != "benchmark"
    ]


def merge(old: str, new_blocks: dict[str, str], title: str = "# Benchmarks") -> str:
    """``old`` with each block in ``new_blocks`` (name -> body) replaced or added; the rest untouched.

    An empty ``old`` gives the title, then the blocks in order, ``how`` last."""
    if not old.strip():
        order = [n for n in new_blocks if n != "how"] + (["how"] if "how" in new_blocks else [])
        return "\n".join([title, "", *(block(n, new_blocks[n]) for n in order)])
    present = blocks(old)
    text = _BLOCK.sub(
        lambda m: block(m["name"], new_blocks[m["name"]]) if m["name"] in new_blocks else m[0], old
    )
    missing = [n for n in new_blocks if n not in present]
    if not missing:
        return text
    added = "".join(block(n, new_blocks[n]) + "\n" for n in missing)
    how = text.find("<!-- bench:how -->")
    if how < 0:
        return text.rstrip("\n") + "\n\n" + added
    return text[:how] + added + text[how:]
