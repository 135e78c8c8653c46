"""TEST TOOLING ONLY: the ``_diagnostics`` group, registered only when ``MEMORYD_TEST_TOOLS=1``.

It exists so the serving layer can be tested end to end without the index: ``diag_echo`` returns its
argument (id and size round-trips), ``diag_sleep`` waits (timeouts, cancellation, shutdown),
``diag_fail`` raises each kind of error the boundary maps. Never enabled in a normal daemon.
"""

from __future__ import annotations

from typing import Any

import anyio

from memoryd.errors import InvalidParams, NotFound
from memoryd.tools.registry import ToolContext, ToolResult, ToolSpec

_ANY_VALUE: dict[str, Any] = {}  # JSON Schema accepting any JSON value
_SECONDS = {
    "type": "object",
    "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 600}},
    "required": ["seconds"],
    "additionalProperties": False,
}


async def _echo(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    return ToolResult(structured={"value": args["value"], "session": ctx.session_id})


async def _sleep(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    await anyio.sleep(args["seconds"])
    return {"slept_s": args["seconds"]}


async def _fail(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    kind = args["kind"]
    if kind == "not_found":
        raise NotFound("diag_fail: nothing by that id (a tool-level failure)")
    if kind == "invalid_params":
        raise InvalidParams("diag_fail: a handler-side argument check failed")
    if kind == "timeout_error":
        raise TimeoutError("a TimeoutError raised by the tool itself, not the call deadline")
    raise RuntimeError("diag_fail: an unexpected crash with /secret/path in its text")


async def _stop_watcher(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Stop the engine's board watcher (healthcheck tests: a stopped watcher must read as degraded)."""
    engine = await ctx.engine()
    await anyio.to_thread.run_sync(engine.watcher.stop)
    return {"stopped": True, "alive": engine.watcher.alive()}


def tools() -> list[ToolSpec]:
    readonly = {"readOnlyHint": True, "openWorldHint": False}
    return [
        ToolSpec(
            name="diag_echo",
            description="TEST TOOL: returns `value` unchanged, plus the session number.",
            input_schema={
                "type": "object",
                "properties": {"value": _ANY_VALUE},
                "required": ["value"],
                "additionalProperties": False,
            },
            output_schema={
                "type": "object",
                "properties": {"value": _ANY_VALUE, "session": {"type": "integer"}},
                "required": ["value", "session"],
            },
            annotations=readonly,
            handler=_echo,
        ),
        ToolSpec(
            name="diag_sleep",
            description="TEST TOOL: sleeps `seconds`, then returns.",
            input_schema=_SECONDS,
            annotations=readonly,
            handler=_sleep,
        ),
        ToolSpec(
            name="diag_sleep_long",
            description="TEST TOOL: sleeps `seconds` under its own 8 s budget, as a writing batch tool would.",
            input_schema=_SECONDS,
            annotations={"readOnlyHint": False},
            handler=_sleep,
            timeout_s=8.0,
        ),
        ToolSpec(
            name="diag_fail",
            description="TEST TOOL: fails in the way `kind` names.",
            input_schema={
                "type": "object",
                "properties": {"kind": {"enum": ["not_found", "invalid_params", "timeout_error", "crash"]}},
                "required": ["kind"],
                "additionalProperties": False,
            },
            annotations=readonly,
            handler=_fail,
        ),
        ToolSpec(
            name="diag_stop_watcher",
            description="TEST TOOL: stops the board watcher (healthcheck must then report degraded).",
            input_schema={"type": "object", "properties": {}, "additionalProperties": False},
            handler=_stop_watcher,
        ),
    ]
