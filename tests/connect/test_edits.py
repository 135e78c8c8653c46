"""The text edits on their own: every layout a config file comes in gets memoryd's entry as one insertion,
and removing it gives back the exact bytes; JSONC and broken files are recognised, never rewritten."""

from __future__ import annotations

import json

import pytest

from memoryd.cli.connect import edits, jsonedit, tomledit

ENTRY = {"command": "/opt/venv/bin/python", "args": ["-m", "memoryd_shim", "--tools", "briefs"]}
LAYOUTS = {
    "two spaces": '{\n  "theme": "dark",\n  "mcpServers": {\n    "a": {"command": "x"}\n  }\n}\n',
    "tabs, no final newline": '{\n\t"servers": {\n\t\t"a": {\n\t\t\t"command": "x"\n\t\t}\n\t}\n}',
    "one line": '{"mcpServers":{"a":{"command":"x"}},"z":1}',
    "CRLF": '{\r\n    "mcpServers": {\r\n        "a": {}\r\n    }\r\n}\r\n',
    "byte-order mark": '\ufeff{\n  "mcpServers": {}\n}\n',
    "empty container, spaced": '{ "mcpServers": { } }',
    "no container": '{\n  "url": "https://example.com//path /* not a comment */"\n}\n',
    "empty object": "{}",
    "empty file": "",
}


def one_insertion(old: str, new: str) -> bool:
    prefix = next(
        (i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new))
    )
    return new.startswith(old[:prefix]) and new.endswith(old[prefix:]) and len(new) > len(old)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_json_entry_round_trip(layout):
    text = LAYOUTS[layout]
    container = ("servers",) if '"servers"' in text else ("mcpServers",)
    new = edits.set_entry(text, "json", container, ENTRY)
    value = json.loads(new.lstrip("\ufeff"))
    assert value[container[0]]["memoryd"] == ENTRY
    if text.strip() and "{ }" not in text:
        assert one_insertion(text, new), new
    if "\r\n" in text:
        assert "\n" not in new.replace("\r\n", "")  # no bare newlines mixed in
    assert edits.set_entry(new, "json", container, ENTRY) == new
    had = edits.containers_present(text, "json") if text.strip() else set()
    back = edits.remove_entry(new, "json", container, had)
    if layout == "empty container, spaced":
        assert json.loads(back) == json.loads(text)  # the inner spacing of "{ }" is not kept
    elif layout == "empty file":
        assert back == "{}\n"
    else:
        assert back == text


def test_indentation_follows_the_file():
    new = edits.set_entry(LAYOUTS["tabs, no final newline"], "json", ("servers",), ENTRY)
    assert '\n\t\t"memoryd": {\n\t\t\t"command"' in new
    new = edits.set_entry(LAYOUTS["CRLF"], "json", ("mcpServers",), ENTRY)
    assert '\r\n        "memoryd": {\r\n            "command"' in new


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ('{\n  // servers\n  "mcpServers": {}\n}', "jsonc"),
        ('{"mcpServers": {"a": {"command": "x"},},}', "jsonc"),
        ('{"a": "// in a string is fine" /* but this is a comment */}', "jsonc"),
        ('{"mcpServers": {"a": ', "invalid"),
        ("null", "invalid"),
        ("[" * 50000 + "]" * 50000, "invalid"),
    ],
)
def test_files_that_are_not_plain_json_are_recognised(text, kind):
    with pytest.raises(jsonedit.NotPlainJson) as err:
        edits.set_entry(text, "json", ("mcpServers",), ENTRY)
    assert err.value.kind == kind


def test_jsonc_is_still_read_for_status():
    text = '{\n  // mine\n  "mcpServers": {"memoryd": {"command": "/x"},},\n}'
    assert edits.read_entry(text, "json", ("mcpServers",)) == {"command": "/x"}


TOML = '# top comment\nmodel = "o3"  # inline\n\n[mcp_servers.docs]\ncommand = "npx"\n\n[profiles.fast]\nmodel = "mini"\n'


@pytest.mark.parametrize("text", [TOML, "", 'model = "o3"\n', "[mcp_servers]\n"])
def test_toml_entry_round_trip(text):
    new = edits.set_entry(text, "toml", ("mcp_servers",), ENTRY)
    assert new.startswith(text) and tomledit.get_entry(new, "memoryd") == ENTRY
    assert "# top comment" in new or "# top comment" not in text
    assert edits.set_entry(new, "toml", ("mcp_servers",), ENTRY) == new
    had = edits.containers_present(text, "toml")
    assert edits.remove_entry(new, "toml", ("mcp_servers",), had) == text


def test_toml_stale_entry_is_replaced_where_it_is_and_comments_survive():
    text = TOML.replace(
        "[profiles.fast]", '[mcp_servers.memoryd]\ncommand = "/old/python"  # moved\n\n[profiles.fast]'
    )
    new = edits.set_entry(text, "toml", ("mcp_servers",), ENTRY)
    assert tomledit.get_entry(new, "memoryd") == ENTRY
    assert new.index("[mcp_servers.memoryd]") < new.index("[profiles.fast]")
    assert "# top comment" in new and "# inline" in new
    removed = edits.remove_entry(new, "toml", ("mcp_servers",), None)
    assert tomledit.get_entry(removed, "memoryd") is None and "[mcp_servers.docs]" in removed


def test_toml_comments_inside_memoryds_own_table_survive_a_refresh():
    text = TOML.replace(
        "[profiles.fast]",
        "[mcp_servers.memoryd]\n# added by hand: keep\n"
        'command = "/old/python"  # moved\nstartup_timeout_sec = 30  # slow disk\n\n'
        '[mcp_servers.memoryd.env]\n# my proxy\nHTTPS_PROXY = "http://proxy:3128"\n\n[profiles.fast]',
    )
    entry = {**ENTRY, "startup_timeout_sec": 30, "env": {"HTTPS_PROXY": "http://proxy:3128"}}
    new = edits.set_entry(text, "toml", ("mcp_servers",), entry)
    assert tomledit.get_entry(new, "memoryd") == entry
    for comment in (
        "# added by hand: keep",
        "# moved",
        "# slow disk",
        "# my proxy",
        "# top comment",
        "# inline",
    ):
        assert comment in new, (comment, new)
    assert (
        new.index("# added by hand") < new.index("[mcp_servers.memoryd.env]") < new.index("[profiles.fast]")
    )


def test_broken_toml_is_refused():
    with pytest.raises(tomledit.NotToml):
        edits.set_entry('model = "o3\n[mcp_servers', "toml", ("mcp_servers",), ENTRY)
    with pytest.raises(tomledit.NotToml):
        edits.set_entry('mcp_servers = "nope"\n', "toml", ("mcp_servers",), ENTRY)


def test_hook_groups_of_other_tools_are_kept():
    text = json.dumps(
        {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}}, indent=2
    )
    new = edits.set_hook(text, "/v/bin/python -m memoryd hook claude-stop")
    stop = json.loads(new)["hooks"]["Stop"]
    assert stop[0]["hooks"][0]["command"] == "say done" and len(stop) == 2
    moved = edits.set_hook(new, "/moved/bin/python -m memoryd hook claude-stop")
    assert [g["hooks"][0]["command"] for g in json.loads(moved)["hooks"]["Stop"]] == [
        "say done",
        "/moved/bin/python -m memoryd hook claude-stop",
    ]
    assert edits.remove_hook(moved, edits.containers_present(text, "json")) == text
