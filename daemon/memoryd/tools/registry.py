"""Tool groups: what a tool is (:class:`ToolSpec`), what it gets (:class:`ToolContext`), what it returns.

A *group* is a named list of tool specs (``briefs``, ``memories``, ``sessions``, ``memo``; the hello's
``tools`` picks the groups a session sees, contract §4). A group module exposes ``tools() -> list[ToolSpec]``
and is listed in :data:`memoryd.tools.GROUP_MODULES`; :func:`memoryd.tools.build_registry` imports it.

Example (a group module)::

    async def _search(args: dict, ctx: ToolContext) -> ToolResult:
        engine = await ctx.engine()                   # raises WarmingUp while the index loads
        found = await engine.searcher.search(SearchQuery(args["query"], project=args.get("project"), limit=10))
        return ToolResult(structured={"shown": len(found.hits), "results": found.hits}, text=render(found))

    def tools() -> list[ToolSpec]:
        return [ToolSpec(
            name="search_briefs",                     # ^[a-zA-Z0-9_-]{1,64}$, unique across all groups
            description="...written for the model: when to use it, and why another tool won't do...",
            input_schema={"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"],
                          "additionalProperties": False},
            output_schema={"type": "object", ...},    # optional; structured output must then match it
            annotations={"readOnlyHint": True, "openWorldHint": False},   # MCP ToolAnnotations, wire names
            handler=_search,
        )]

Handlers raise :mod:`memoryd.errors` exceptions (``InvalidParams``, ``NotFound``, ``BoardUnreadable``...)
or anything else; the boundary in :mod:`memoryd.serve.app` maps them (a tool never builds an error answer
itself: ``error_envelope`` only shapes the boundary's). Arguments reach the handler already
validated against ``input_schema`` (JSON Schema 2020-12, by ``jsonschema``).
"""

from __future__ import annotations

import json
import re
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

import mcp_types as types
from jsonschema import SchemaError, exceptions, validators

from memoryd.core.warmup import EngineHandle
from memoryd.errors import Envelope, InvalidParams
from memoryd.index.redact import redact
from memoryd.textcheck import first_lone_surrogate
from memoryd.tools.schema import whole_numbers

#: Tool names: the MCP spec's recommendation narrowed to what every client accepts.
TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_MAX_ERROR_TEXT = 400
#: What a call keeps of its budget for its own work after waiting for a loading engine (seconds).
ANSWER_MARGIN_S = 1.0


@dataclass(frozen=True)
class ToolResult:
    """What a handler returns: ``structured`` (JSON object) plus an optional readable ``text`` of the same
    data. Without ``text`` the text block is ``structured`` as JSON, so both always say the same thing
    (Codex shows the model only ``structuredContent``; older clients only the text)."""

    structured: dict[str, Any]
    text: str | None = None


class CallMetrics(Protocol):
    """The tool boundary's call metrics as a tool reads them (:class:`memoryd.serve.metrics.ToolMetrics`)."""

    def snapshot(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ToolContext:
    """Per-call context: who is calling, the time budget, the process-level engine and call metrics.

    ``deadline`` is a ``time.monotonic()`` value after which the call is stopped by the boundary.
    """

    tool: str
    session_id: int
    groups: tuple[str, ...]
    cwd: str | None
    client_pid: int | None
    protocol_version: str
    deadline: float
    engine_handle: EngineHandle
    metrics: CallMetrics
    log: Any = field(repr=False, default=None)
    #: The SDK's ``ServerSession`` of this call (server-to-client requests such as
    #: ``sampling/createMessage``, and ``report_progress``); None outside the MCP boundary.
    client_session: Any = field(repr=False, default=None)
    #: The JSON-RPC id of this ``tools/call`` as the SDK sees it (for request-scoped messages).
    request_id: Any = None
    #: Seconds spent in :meth:`engine` waiting for a loading engine (the answer says so).
    _engine_waits: list[float] = field(default_factory=list, repr=False)

    @property
    def remaining_s(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    @property
    def engine_waited_s(self) -> float | None:
        """How long this call waited for the engine to load, or ``None`` when it was ready at once."""
        return sum(self._engine_waits) if self._engine_waits else None

    async def engine(self, wait_s: float | None = None) -> Any:
        """The engine, waiting up to ``wait_s`` (default: the remaining budget less a margin to answer,
        :data:`ANSWER_MARGIN_S` at most) while it loads.

        Raises :class:`~memoryd.errors.WarmingUp` (still loading: the message tells the model to retry)
        or :class:`~memoryd.errors.EngineUnavailable` (failed or not configured).
        """
        remaining = self.remaining_s
        budget = (
            remaining - min(ANSWER_MARGIN_S, remaining * 0.1) if wait_s is None else min(wait_s, remaining)
        )
        if self.engine_handle.state != "loading":
            return await self.engine_handle.get(wait_s=budget)
        started = time.monotonic()
        try:
            return await self.engine_handle.get(wait_s=budget)
        finally:
            self._engine_waits.append(time.monotonic() - started)


Handler = Callable[[dict[str, Any], ToolContext], Awaitable[ToolResult | dict[str, Any]]]


@dataclass(frozen=True)
class ToolSpec:
    """One tool. ``annotations`` uses the MCP wire names (``readOnlyHint``, ``destructiveHint``,
    ``idempotentHint``, ``openWorldHint``, ``title``). ``checks_text``: the handler rejects lone
    surrogates itself (a batch tool failing only the item that holds one), so the boundary does not."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    handler: Handler
    output_schema: Mapping[str, Any] | None = None
    annotations: Mapping[str, Any] | None = None
    title: str | None = None
    checks_text: bool = False
    timeout_s: float | None = None  # a longer budget than MEMORYD_TOOL_TIMEOUT_MS (batches, import/export)
    #: Shapes this tool's error answers as ``structuredContent`` (:data:`memoryd.errors.Envelope`); only
    #: for an ``output_schema`` that admits them. None: an error is its message as text alone.
    error_envelope: Envelope | None = None


#: MCP tool hints (wire names) the groups share; no memoryd tool reaches outside the machine.
READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}
WRITE = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}
APPEND = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False, "openWorldHint": False}
DELETE = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True, "openWorldHint": False}


def titled_spec(
    name: str,
    title: str,
    description: str,
    handler: Handler,
    input_schema: Mapping[str, Any],
    output_schema: Mapping[str, Any] | None = None,
    hints: Mapping[str, Any] = READ_ONLY,
    **options: Any,
) -> ToolSpec:
    """A :class:`ToolSpec` whose annotations are ``hints`` plus its ``title``; ``options`` are the other
    ``ToolSpec`` fields (``timeout_s``, ``checks_text``, ``error_envelope``)."""
    return ToolSpec(
        name=name,
        title=title,
        description=description,
        input_schema=input_schema,
        output_schema=output_schema,
        annotations={**hints, "title": title},
        handler=handler,
        **options,
    )


def _check_object_schema(tool: str, which: str, schema: Mapping[str, Any], meta: bool = True) -> Any:
    """The validator of ``schema``; ``ValueError`` for a non-object root or (``meta``) a metaschema breach."""
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        raise ValueError(f"tool {tool}: {which} must be a JSON Schema with type 'object' at the root")
    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    try:
        if meta:
            cls.check_schema(schema)
    except SchemaError as exc:
        raise ValueError(f"tool {tool}: {which} is not a valid JSON Schema: {exc.message}") from exc
    return cls(dict(schema))


def _first_error(validator: Any, instance: Any) -> str | None:
    error = exceptions.best_match(validator.iter_errors(instance))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(arguments)"
    # jsonschema quotes the offending value: a pasted secret must not come back in the error.
    return redact(f"{where}: {_reason(error)}"[:_MAX_ERROR_TEXT]).text


class _Passes:
    """``passes(instance) -> bool``: a quick first check of ``schema`` (fastjsonschema, compiled at the first
    call). True means valid; False means "ask jsonschema", which words the error. Our output schemas use
    only keywords that mean the same in draft 7 and 2020-12. Never changes ``instance`` (no defaults)."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self._schema = dict(schema)
        self._check: Callable[[Any], Any] | None = None

    def __call__(self, instance: Any) -> bool:
        if self._check is None:
            try:
                import fastjsonschema  # here: ~20-40 ms of imports the daemon's start need not wait for

                self._check = fastjsonschema.compile(self._schema, use_default=False)
            except Exception:  # a schema it cannot compile: jsonschema judges every answer
                self._check = _undecided
        try:
            self._check(instance)
        except Exception:  # a breach, or a value it cannot judge: jsonschema decides
            return False
        return True


def _undecided(instance: Any) -> None:
    raise ValueError("no quick check")


_SIZES = {"maxLength": (str, "characters"), "maxItems": (list, "items"), "maxProperties": (dict, "keys")}


def _reason(error: Any) -> str:
    """jsonschema's message, but a size rule says the size and the limit instead of quoting the whole
    value (a long value would push the reason past the message's cut), a long value is shortened, and a
    bounded integer given as another type names its range."""
    kind, unit = _SIZES.get(error.validator, (None, ""))
    if kind is not None and isinstance(error.instance, kind):
        return f"{len(error.instance):,} {unit}, more than the {error.validator_value:,} allowed"
    quoted = repr(error.instance)
    message = error.message
    if len(quoted) > 80 and quoted in message:
        message = message.replace(quoted, f"{quoted[:60]}… ({len(quoted):,} characters)", 1)
    bounds = error.schema if isinstance(error.schema, Mapping) else {}
    low, high = bounds.get("minimum"), bounds.get("maximum")
    if (error.validator, error.validator_value) == ("type", "integer") and None not in (low, high):
        message += f": a whole number from {low} to {high}"  # 0.8 meant on a 0-1 scale is not 1
    return message


class RegisteredTool:
    """A spec with its compiled validators and its wire ``Tool`` (computed once at registration).
    ``check_schemas=False`` skips the metaschema check of its schemas (see :class:`ToolRegistry`)."""

    def __init__(self, spec: ToolSpec, group: str, check_schemas: bool = True) -> None:
        if not TOOL_NAME_RE.fullmatch(spec.name):
            raise ValueError(f"tool name {spec.name!r} must match {TOOL_NAME_RE.pattern}")
        if not spec.description.strip():
            raise ValueError(f"tool {spec.name}: a description is required (it is what the model reads)")
        self.spec = spec
        self.group = group
        self._input = _check_object_schema(spec.name, "input_schema", spec.input_schema, check_schemas)
        self._output = (
            _check_object_schema(spec.name, "output_schema", spec.output_schema, check_schemas)
            if spec.output_schema
            else None
        )
        self._output_passes = _Passes(spec.output_schema) if spec.output_schema else None
        self.wire = types.Tool(
            name=spec.name,
            title=spec.title,
            description=spec.description,
            input_schema=dict(spec.input_schema),
            output_schema=dict(spec.output_schema) if spec.output_schema else None,
            annotations=types.ToolAnnotations.model_validate(dict(spec.annotations), by_name=False)
            if spec.annotations
            else None,
        )

    def check_arguments(self, arguments: dict[str, Any]) -> None:
        """Raise :class:`InvalidParams` naming the first schema violation or a string holding a lone UTF-16
        surrogate (``"\\ud800"`` is valid JSON but no Unicode text: nothing downstream can encode it).
        Valid ``arguments`` change in place: ``1.0`` where the schema says integer becomes ``1``."""
        problem = _first_error(self._input, arguments)
        if problem is None and not self.spec.checks_text:
            problem = first_lone_surrogate(arguments)
        if problem is not None:
            raise InvalidParams(f"Invalid arguments for tool {self.spec.name}: {problem}")
        whole_numbers(self.spec.input_schema, arguments)

    def to_result(self, output: ToolResult | dict[str, Any]) -> types.CallToolResult:
        """Shape a handler's output; raises ``ValueError`` when it breaks the declared output schema."""
        result = output if isinstance(output, ToolResult) else ToolResult(structured=output)
        if not isinstance(result.structured, dict):
            raise ValueError(
                f"tool {self.spec.name} returned {type(result.structured).__name__}, not an object"
            )
        if (
            self._output is not None
            and not self._output_passes(result.structured)
            and (problem := _first_error(self._output, result.structured))
        ):
            raise ValueError(f"tool {self.spec.name} output breaks its output_schema: {problem}")
        text = result.text if result.text is not None else json.dumps(result.structured, ensure_ascii=False)
        return types.CallToolResult(
            content=[types.TextContent(text=text)], structured_content=result.structured, is_error=False
        )


class ToolRegistry:
    """All tool groups known to this daemon. Registration validates every spec; lookups never fall back
    to attribute access, so names like ``constructor`` or ``__proto__`` are simply unknown.

    ``check_schemas=False`` (the daemon's start) skips the JSON Schema metaschema check: 0.1-0.4 s for the
    shipped groups, between the bind and the first answer; their schemas are constants the tests check.
    """

    def __init__(self, check_schemas: bool = True) -> None:
        self.check_schemas = check_schemas
        self._groups: dict[str, list[RegisteredTool]] = {}
        self._always: list[str] = []
        self._names: dict[str, str] = {}
        self._resources: dict[str, list[ResourceSpec]] = {}  # group -> its resources (fixed URIs)

    def add_group(self, group: str, tools: Iterable[ToolSpec], *, always: bool = False) -> None:
        """Register ``tools`` under ``group``. ``always`` makes the group visible in every session whatever
        the hello asked for (used only by the test-only ``_diagnostics`` group). Raises ``ValueError``."""
        if group in self._groups:
            raise ValueError(f"tool group {group!r} is already registered")
        registered = []
        for spec in tools:
            if spec.name in self._names:
                raise ValueError(f"tool {spec.name!r} is in both {self._names[spec.name]!r} and {group!r}")
            registered.append(RegisteredTool(spec, group, self.check_schemas))
            self._names[spec.name] = group
        self._groups[group] = registered
        if always:
            self._always.append(group)

    @property
    def groups(self) -> list[str]:
        return list(self._groups)

    def visible(self, groups: Iterable[str]) -> dict[str, RegisteredTool]:
        """Name -> tool for a session that asked for ``groups`` (plus the always-on groups), in order."""
        chosen = [*groups, *(g for g in self._always if g not in groups)]
        return {t.spec.name: t for g in chosen for t in self._groups.get(g, ())}

    def add_resources(self, group: str, resources: Iterable[ResourceSpec | ResourceTemplateSpec]) -> None:
        """Register the MCP resources and resource templates of ``group`` (a group module's optional
        ``resources()``). Raises ``ValueError`` for a URI or URI template that is already registered."""
        known = {r.uri for lst in self._resources.values() for r in lst}
        specs = list(resources)
        for spec in specs:
            if spec.uri in known:
                raise ValueError(f"resource {spec.uri!r} is registered twice")
            known.add(spec.uri)
        self._resources.setdefault(group, []).extend(specs)

    def _chosen(self, groups: Iterable[str]) -> list[str]:
        groups = list(groups)
        return [*groups, *(g for g in self._always if g not in groups)]

    def visible_resources(self, groups: Iterable[str]) -> dict[str, ResourceSpec]:
        """URI -> fixed-URI resource for a session that asked for ``groups`` (plus the always-on groups)."""
        return {
            r.uri: r
            for g in self._chosen(groups)
            for r in self._resources.get(g, ())
            if isinstance(r, ResourceSpec)
        }

    def visible_templates(self, groups: Iterable[str]) -> list[ResourceTemplateSpec]:
        """The resource templates of a session that asked for ``groups``, in registration order."""
        return [
            r
            for g in self._chosen(groups)
            for r in self._resources.get(g, ())
            if isinstance(r, ResourceTemplateSpec)
        ]


ResourceReader = Callable[[ToolContext], Awaitable[str]]
TemplateReader = Callable[[ToolContext, Mapping[str, str]], Awaitable[str]]
_TEMPLATE_VAR = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True)
class _Resource:
    """What a fixed-URI resource and a resource template share: a URI (or URI template), how they are
    listed (``name``, ``description``, ``mime_type``, ``title``) and ``read``, which builds the text."""

    uri: str
    name: str
    description: str
    read: Callable[..., Awaitable[str]]
    mime_type: str = "text/plain"
    title: str | None = None

    def _listed(self) -> dict[str, Any]:
        """Every field but ``uri`` and ``read``: what a listing shows besides the URI (the wire's names)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("uri", "read")}


@dataclass(frozen=True)
class ResourceSpec(_Resource):
    """A text resource with a fixed URI (MCP "Resources"): ``read(ctx) -> str`` builds its text on each
    ``resources/read`` (``ctx`` is a :class:`ToolContext` named after the URI). A group module lists its
    resources in an optional ``resources() -> list[ResourceSpec]``."""

    read: ResourceReader

    @property
    def wire(self) -> types.Resource:
        return types.Resource(uri=self.uri, **self._listed())


@dataclass(frozen=True)
class ResourceTemplateSpec(_Resource):
    """A family of text resources (MCP "Resource Templates"): ``uri`` is the URI template, holding ``{name}``
    variables (RFC 6570 level 1), each matching one non-empty path segment of at most 200 characters,
    percent-decoded; ``read(ctx, {name: value})`` builds the text. Listed by ``resources/templates/list``; a
    URI that matches no template is "resource not found"."""

    read: TemplateReader

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables of ``uri`` when it is one of this template's URIs, else None."""
        parts = _TEMPLATE_VAR.split(self.uri)  # literal, name, literal, name, ..., literal
        pattern = "".join(
            re.escape(part) if i % 2 == 0 else f"(?P<{part}>[^/?#]{{1,200}})" for i, part in enumerate(parts)
        )
        found = re.fullmatch(pattern, uri)
        if found is None:
            return None
        values = {k: urllib.parse.unquote(v) for k, v in found.groupdict().items()}
        return values if all(v.strip() for v in values.values()) else None

    @property
    def wire(self) -> types.ResourceTemplate:
        return types.ResourceTemplate(uri_template=self.uri, **self._listed())
