"""In-process checks of the serving layer's pure parts: line classification, id mapping, tool registry,
the engine warm-up slot. The end-to-end behaviour is in ``tests/e2e``."""

from __future__ import annotations

import asyncio
import json
import re

import mcp_types as types
import pytest

from memoryd.core.warmup import EngineHandle
from memoryd.errors import EngineUnavailable, InvalidParams, WarmingUp
from memoryd.serve import jsonrpc
from memoryd.tools import (
    ResourceSpec,
    ResourceTemplateSpec,
    ToolRegistry,
    ToolResult,
    ToolSpec,
    build_registry,
)


def reply_of(line: bytes):
    outcome = jsonrpc.classify(line)
    assert isinstance(outcome, jsonrpc.Reply), outcome
    return json.loads(outcome.line)


def test_classify_forwards_well_formed_messages():
    for line in (
        b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
        b'{"jsonrpc":"2.0","id":3,"result":{}}',
        b'{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"m"}}',
    ):
        assert isinstance(jsonrpc.classify(line), jsonrpc.Forward)


def test_classify_answers_or_drops_the_rest():
    assert reply_of(b"{x")["error"]["code"] == -32700
    assert reply_of(b"[]")["id"] is None
    assert reply_of(b'{"jsonrpc":"2.0","id":"k","method":null}')["id"] == "k"
    batch = reply_of(b'[{"jsonrpc":"2.0","id":"a","method":"ping"}]')
    assert [e["id"] for e in batch] == ["a"]
    assert isinstance(jsonrpc.classify(b"   "), jsonrpc.Drop)
    assert isinstance(jsonrpc.classify(b'{"jsonrpc":"2.0","method":"x","params":[1]}'), jsonrpc.Drop)
    assert isinstance(jsonrpc.classify(b'{"id":1,"result":{}}'), jsonrpc.Drop)


def test_lone_surrogate_ids_round_trip_as_escapes():
    line = jsonrpc.error_line("\ud800", -32600, "m")
    assert json.loads(line)["id"] == "\ud800"
    message = types.JSONRPCResponse(jsonrpc="2.0", id="\ud800", result={})
    assert json.loads(jsonrpc.encode_message(message))["id"] == "\ud800"


def test_id_map_keeps_types_apart_and_never_leaks_private_ids():
    ids = jsonrpc.IdMap()

    def request(id):
        return types.JSONRPCRequest(jsonrpc="2.0", id=id, method="ping")

    a, b = ids.inbound(request(7)), ids.inbound(request("7"))
    assert a.id != b.id and isinstance(a.id, int) and isinstance(b.id, int)
    cancel = types.JSONRPCNotification(
        jsonrpc="2.0", method="notifications/cancelled", params={"requestId": "7"}
    )
    forwarded = ids.inbound(cancel)
    assert forwarded.params["requestId"] == b.id
    unknown = types.JSONRPCNotification(
        jsonrpc="2.0", method="notifications/cancelled", params={"requestId": 99}
    )
    assert ids.inbound(unknown) is None
    answer = ids.outbound(types.JSONRPCResponse(jsonrpc="2.0", id=a.id, result={}))
    assert answer.id == 7 and type(answer.id) is int
    assert ids.outbound(types.JSONRPCResponse(jsonrpc="2.0", id=b.id, result={})) is None  # cancelled
    assert len(ids) == 0


async def _noop(args, ctx):
    return {"ok": True}


def spec(name: str = "t_ok", **kwargs) -> ToolSpec:
    values = {
        "name": name,
        "description": "a test tool",
        "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        "handler": _noop,
    }
    values.update(kwargs)
    return ToolSpec(**values)


@pytest.mark.parametrize("name", ["", "has space", "x" * 65, "dot.ted", "slash/ed", "ünï"])
def test_registry_refuses_bad_tool_names(name):
    with pytest.raises(ValueError):
        ToolRegistry().add_group("g", [spec(name)])


def test_registry_refuses_bad_schemas_and_duplicates():
    with pytest.raises(ValueError, match="type 'object'"):
        ToolRegistry().add_group("g", [spec(input_schema={"type": "string"})])
    with pytest.raises(ValueError, match="not a valid JSON Schema"):
        ToolRegistry().add_group("g", [spec(input_schema={"type": "object", "properties": 3})])
    registry = ToolRegistry()
    registry.add_group("a", [spec("same")])
    with pytest.raises(ValueError, match="both"):
        registry.add_group("b", [spec("same")])


def test_the_daemons_registry_skips_only_the_metaschema_check_which_every_shipped_schema_passes():
    broken = spec(input_schema={"type": "object", "properties": 3})
    unchecked = ToolRegistry(check_schemas=False)
    unchecked.add_group("g", [broken])  # the daemon's start: no metaschema check
    with pytest.raises(ValueError, match="type 'object'"):  # the cheap checks stay
        unchecked.add_group("h", [spec("other", input_schema={"type": "string"})])
    shipped = build_registry(test_tools=True)  # checked: what the daemon skips holds for every shipped tool
    daemons = build_registry(test_tools=True, check_schemas=False)
    assert [t.wire for t in daemons.visible(shipped.groups).values()] == [
        t.wire for t in shipped.visible(shipped.groups).values()
    ]


def test_registry_visibility_follows_groups():
    registry = ToolRegistry()
    registry.add_group("briefs", [spec("one")])
    registry.add_group("memo", [spec("two")])
    registry.add_group("_test", [spec("three")], always=True)
    assert list(registry.visible(["briefs"])) == ["one", "three"]
    assert list(registry.visible(["memo", "briefs"])) == ["two", "one", "three"]
    assert "constructor" not in registry.visible(["briefs"])


def test_arguments_and_outputs_are_checked():
    registry = ToolRegistry()
    registry.add_group(
        "g",
        [
            spec(
                output_schema={
                    "type": "object",
                    "properties": {"ok": {"type": "boolean"}},
                    "required": ["ok"],
                }
            )
        ],
    )
    tool = registry.visible(["g"])["t_ok"]
    tool.check_arguments({"n": 1})
    with pytest.raises(InvalidParams, match="n: 'x' is not of type 'integer'"):
        tool.check_arguments({"n": "x"})
    sized = ToolRegistry()
    schema = {"type": "object", "properties": {"text": {"type": "string", "maxLength": 100}}}
    sized.add_group("g", [spec(input_schema={**schema, "required": ["text"]})])
    with pytest.raises(InvalidParams, match="text: 100,001 characters, more than the 100 allowed"):
        sized.visible(["g"])["t_ok"].check_arguments({"text": "z " * 50_000 + "z"})
    with pytest.raises(InvalidParams, match=r"text: \['z z z.*… \(.* characters\) is not of type 'string'"):
        sized.visible(["g"])["t_ok"].check_arguments({"text": ["z " * 100]})
    result = tool.to_result(ToolResult(structured={"ok": True}, text="fine"))
    assert result.structured_content == {"ok": True} and result.content[0].text == "fine"
    assert json.loads(tool.to_result({"ok": False}).content[0].text) == {"ok": False}
    with pytest.raises(ValueError, match="output_schema"):
        tool.to_result({"ok": "yes"})


def test_resource_templates_match_one_decoded_segment_and_list_apart_from_fixed_uris():
    async def read(ctx, values=None):
        return ""

    template = ResourceTemplateSpec("briefs://context/{project}", "t", "d", read)
    assert template.match("briefs://context/shop%20front") == {"project": "shop front"}
    assert template.match("briefs://context/a%2Fb") == {"project": "a/b"}
    for other in ("briefs://context/", "briefs://context/a/b", "briefs://context", "briefs://context/%20"):
        assert template.match(other) is None, other
    assert template.match("briefs://context/" + "x" * 201) is None
    registry = ToolRegistry()
    registry.add_resources("briefs", [ResourceSpec("briefs://context", "c", "d", read), template])
    assert list(registry.visible_resources(["briefs"])) == ["briefs://context"]
    assert registry.visible_templates(["briefs"]) == [template] and registry.visible_templates(["memo"]) == []
    assert template.wire.uri_template == "briefs://context/{project}"
    with pytest.raises(ValueError, match="twice"):
        registry.add_resources("memo", [ResourceTemplateSpec("briefs://context/{project}", "t", "d", read)])


def test_default_registry_has_test_tools_only_when_asked():
    assert "_diagnostics" not in build_registry().groups
    assert "_diagnostics" in build_registry(test_tools=True).groups


def test_engine_slot_reports_warming_up_then_ready():
    async def main():
        release = asyncio.Event()

        async def factory():
            await release.wait()
            return "engine"

        handle = EngineHandle()
        with pytest.raises(EngineUnavailable, match="without an engine"):
            await handle.get()
        handle.start(factory)
        with pytest.raises(WarmingUp, match="still loading"):
            await handle.get(wait_s=0.05)
        assert (await handle.status())["state"] == "loading"
        release.set()
        assert await handle.get(wait_s=1) == "engine"
        await handle.close(timeout=1)

    asyncio.run(main())


def test_engine_slot_reports_a_failed_load():
    async def main():
        async def factory():
            raise RuntimeError("no index")

        handle = EngineHandle()
        handle.start(factory)
        with pytest.raises(EngineUnavailable, match="no index"):
            await handle.get(wait_s=1)

    asyncio.run(main())


def test_board_and_index_errors_are_kinds_of_the_error_tree_with_their_wire_names():
    from memoryd import errors
    from memoryd.board.gate import InvalidId, UnsafePath
    from memoryd.kinds.briefs.files import FormatError
    from memoryd.kinds.briefs.source import BoardUnreadable
    from memoryd.kinds.briefs.writer import BriefNotFound

    expected = {
        InvalidId("boom"): errors.InvalidParams,
        BoardUnreadable("boom"): errors.BoardUnreadable,
        BriefNotFound("boom"): errors.NotFound,
        UnsafePath("/x", "symlink"): errors.ToolFailed,
        FormatError("boom"): errors.ToolFailed,
    }
    for exc, kind in expected.items():
        assert isinstance(exc, kind), type(exc)
        assert errors.failure_kind(exc) == kind.__name__
    # the standard-library kinds they were before stay true for callers that catch those
    assert isinstance(InvalidId("x"), ValueError) and isinstance(BriefNotFound("x"), LookupError)
    assert errors.failure_kind(KeyError("x")) == "KeyError"


def _engine_tool(handle: EngineHandle, budget_s: float):
    """``call()`` -> the tool boundary (:meth:`McpApp._call_tool`) on one tool that needs the engine; its
    ``ctx`` stands in for the SDK's request context (only the fields the boundary reads)."""
    from types import SimpleNamespace

    from memoryd.serve.app import McpApp, SessionState
    from memoryd.tools.registry import RegisteredTool

    async def handler(args, ctx):
        return {"engine": await ctx.engine()}

    spec = ToolSpec(
        name="needs_engine", description="reads the engine", input_schema={"type": "object"}, handler=handler
    )
    app = McpApp(version="0", engine=handle, tool_timeout_s=budget_s)
    state = SessionState(id=1, groups=("g",), tools={"needs_engine": RegisteredTool(spec, "g")})
    ctx = SimpleNamespace(lifespan_context=state, protocol_version="2025-11-25", request_id=1, session=None)
    return lambda: app._call_tool(ctx, types.CallToolRequestParams(name="needs_engine", arguments={}))


def test_the_first_call_after_a_cold_start_waits_for_the_engine_up_to_its_budget_and_says_so():
    async def main():
        release = asyncio.Event()

        async def factory():
            await release.wait()
            return "engine"

        handle = EngineHandle()
        handle.start(factory)
        call = _engine_tool(handle, budget_s=10.0)
        # ready after 85% of a 10 s budget: past what a call used to wait (80%), well before its last second
        asyncio.get_running_loop().call_later(8.5, release.set)
        result = await call()
        assert result.is_error is False, result
        assert result.structured_content == {"engine": "engine"}
        assert len(result.content) == 2, result
        note = r"\(memoryd waited (\d+\.\d) s for its index to finish loading before answering\.\)"
        waited = re.fullmatch(note, result.content[1].text)
        assert waited and float(waited[1]) >= 8.0, result.content[1].text
        ready = await call()  # warm: no note
        assert ready.is_error is False and len(ready.content) == 1
        await handle.close(timeout=1)

    asyncio.run(main())


def test_a_call_that_outwaits_its_budget_says_how_long_it_waited():
    async def main():
        handle = EngineHandle()
        handle.start(asyncio.Event().wait)  # never ready
        result = await _engine_tool(handle, budget_s=1.0)()
        assert result.is_error is True and "structuredContent" not in result.model_dump(
            by_alias=True, exclude_unset=True
        )
        assert (
            "still loading its index" in result.content[0].text
            and "this call waited 0.9 s" in result.content[0].text
        )
        await handle.close(timeout=1)

    asyncio.run(main())
