"""Cutting ``<private>…</private>`` (:func:`memoryd_shim.textrules.strip_private`, which the hooks and the
daemon's capture both use): the text is gone, a cut between words leaves one space, and whitespace elsewhere
(newlines, indentation, a double space the person typed) is as it was."""

from __future__ import annotations

import json

import pytest

from memoryd.kinds.briefs.capture import clean_prompt, strip_private
from memoryd_shim.hooks import spool
from memoryd_shim.textrules import strip_private as cut_private


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("fix <private>my key</private> the bug", "fix the bug"),
        ("fix<private>my key</private> the bug", "fix the bug"),
        ("fix <private>my key</private>the bug", "fix the bug"),
        ("fix <private>a</private> <private>b</private> it", "fix it"),
        ("    <private>x</private> indented", "    indented"),
        ("end of line <private>x</private>\n  next", "end of line\n  next"),
        ("one\n<private>x</private>\nthree", "one\n\nthree"),
        ("typed  twice <private>x</private> here\n\tkept  as is", "typed  twice here\n\tkept  as is"),
        ("across <private>two\nlines</private> lines", "across lines"),
        ("unclosed <PRIVATE>hides the rest", "unclosed"),
        ("nothing private", "nothing private"),
    ],
)
def test_the_cut_leaves_one_space_and_touches_nothing_else(text, want):
    assert cut_private(text)[0] == want
    assert strip_private(text)[0] == want  # the daemon's cut is the same


def test_a_prompt_and_the_spool_get_the_same_cut(tmp_path):
    assert clean_prompt("Fix <private>card 4111</private> the checkout").text == "Fix the checkout"
    path = tmp_path / "spool.jsonl"
    assert spool({"event": "prompt", "prompt": "Fix <private>card 4111</private> the checkout"}, str(path))
    assert json.loads(path.read_text())["prompt"] == "Fix the checkout"
