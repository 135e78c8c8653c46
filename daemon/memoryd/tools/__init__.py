"""Tool groups served over MCP, and the registry that picks them per session.

A group module (``memoryd.kinds.briefs.tools``...) exposes ``tools() -> list[ToolSpec]`` and is listed in
:data:`GROUP_MODULES`; see :mod:`memoryd.tools.registry` for the spec shape. Modules not written yet are
skipped, so groups land one at a time.
"""

from __future__ import annotations

import importlib
import importlib.util

from memoryd.tools.registry import (
    RegisteredTool,
    ResourceSpec,
    ResourceTemplateSpec,
    ToolContext,
    ToolRegistry,
    ToolResult,
    ToolSpec,
)

__all__ = [
    "DIAGNOSTICS_GROUP",
    "GROUP_MODULES",
    "RegisteredTool",
    "ResourceSpec",
    "ResourceTemplateSpec",
    "ToolContext",
    "ToolRegistry",
    "ToolResult",
    "ToolSpec",
    "build_registry",
]

#: Group name (as in the hello's ``tools``, contract §4) -> module defining ``tools()``.
GROUP_MODULES = {
    "briefs": "memoryd.kinds.briefs.tools",
    "memories": "memoryd.kinds.memories.tools",
    "sessions": "memoryd.kinds.sessions.tools",
    "memo": "memoryd.kinds.memo.tools",
}

#: Test tooling only: enabled by ``MEMORYD_TEST_TOOLS=1``, visible in every session when enabled.
DIAGNOSTICS_GROUP = "_diagnostics"


def build_registry(test_tools: bool = False, *, check_schemas: bool = True) -> ToolRegistry:
    """Register every group whose module exists; ``test_tools`` adds :data:`DIAGNOSTICS_GROUP`;
    ``check_schemas=False``: no metaschema check of the tools' schemas (:class:`ToolRegistry`)."""
    registry = ToolRegistry(check_schemas=check_schemas)
    for group, module_name in GROUP_MODULES.items():
        if importlib.util.find_spec(module_name) is None:
            continue  # not written yet; an import error inside an existing module still raises
        module = importlib.import_module(module_name)
        registry.add_group(group, module.tools())
        if hasattr(module, "resources"):  # optional: the group's MCP resources (and templates)
            registry.add_resources(group, module.resources())
    if test_tools:
        from memoryd.tools import diagnostics as _diagnostics

        registry.add_group(DIAGNOSTICS_GROUP, _diagnostics.tools(), always=True)
    return registry
