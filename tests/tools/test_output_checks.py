"""The quick output check (fastjsonschema) and jsonschema give the same verdict on every shipped tool's
output schema: answers built from each schema, then each field given a value of the wrong kind, dropped,
or joined by one the schema does not name."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from memoryd.tools import build_registry
from memoryd.tools.registry import _Passes


def _example(schema: dict) -> Any:
    """A value for ``schema``: required keys only, first enum/const/branch, the smallest number allowed."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for branches in ("anyOf", "oneOf"):
        if branches in schema:  # the first branch, with the keywords beside it
            rest, branch = {k: v for k, v in schema.items() if k != branches}, schema[branches][0]
            merged = {**rest, **branch}
            merged["properties"] = {**rest.get("properties", {}), **branch.get("properties", {})}
            merged["required"] = [*rest.get("required", []), *branch.get("required", [])]
            return _example(merged)
    kind = schema.get("type", "object")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        props = schema.get("properties", {})
        return {k: _example(props.get(k, {})) for k in schema.get("required", [])}
    if kind == "array":
        return [_example(schema["items"])] if isinstance(schema.get("items"), dict) else []
    return {
        "string": "x",
        "integer": schema.get("minimum", 0),
        "number": schema.get("minimum", 0.5),
        "boolean": True,
        "null": None,
    }[kind]


def _variants(value: Any) -> list[Any]:
    """``value`` and each one-step change of it anywhere inside: a wrong kind, a key dropped or added."""
    out = [value]
    if isinstance(value, dict):
        for key, inner in value.items():
            for wrong in ([], "s", 1.5, None, {"k": 1}, -1, True):
                out.append({**value, key: wrong})
            out.append({k: v for k, v in value.items() if k != key})
            out.extend({**value, key: changed} for changed in _variants(inner)[1:])
        out.append({**value, "not_in_the_schema": 1})
    elif isinstance(value, list) and value:
        out.append([*value, "s"])
        out.extend([changed, *value[1:]] for changed in _variants(value[0])[1:])
    return out


def test_the_quick_check_agrees_with_jsonschema_on_every_shipped_output_schema():
    registry = build_registry(test_tools=True)
    tools = registry.visible(registry.groups)
    schemas = {name: t.spec.output_schema for name, t in tools.items() if t.spec.output_schema}
    assert len(schemas) >= 20
    checked = rejected = 0
    for name, schema in schemas.items():
        exact, quick = Draft202012Validator(schema), _Passes(schema)
        base = _example(schema)
        assert exact.is_valid(base), name
        for variant in _variants(base):
            before = copy.deepcopy(variant)
            assert quick(variant) == exact.is_valid(variant), (name, variant)
            assert variant == before  # the check never fills in defaults
            checked += 1
            rejected += not exact.is_valid(variant)
    assert rejected > checked // 4  # the variants do break the schemas


def test_a_breach_the_quick_check_finds_is_worded_by_jsonschema():
    registry = build_registry()
    tools = registry.visible(registry.groups)
    search = tools["search_briefs"]
    answer = _example(search.spec.output_schema)
    search.to_result(answer)
    with pytest.raises(
        ValueError, match=r"output breaks its output_schema: shown: 'many' is not of type 'integer'"
    ):
        search.to_result({**answer, "shown": "many"})


def test_a_schema_the_quick_check_cannot_compile_leaves_every_verdict_to_jsonschema():
    passes = _Passes({"type": "object", "properties": {"a": {"type": "string", "pattern": "("}}})
    assert passes({}) is False and passes({"a": "x"}) is False
    assert _Passes({"type": "object"})({}) is True
