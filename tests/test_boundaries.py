"""Import boundaries, checked on the source (ast) and on a live interpreter.

* ``memoryd_shim`` imports only the standard library and itself: never ``memoryd``, never a third-party
  package (agents spawn it per session; it must start in milliseconds and work from any interpreter).
* ``lancedb``, ``onnxruntime``, ``onnx`` and ``tokenizers`` are imported only under ``daemon/memoryd/index/``.
* ``structlog`` is imported only by ``memoryd/logs.py`` (whose ``get_logger`` configures stderr first).
* The layout's layers: record kinds (``kinds/``), the board's shared files (``board/``), the index (``index/``),
  the tool machinery (``tools/``) and the importers never import the engine, the serving layer or the CLI;
  ``board/`` and ``index/`` know no record kind; nothing but the CLI imports the CLI.
* The watcher, the writer and the registry of record sources (``core/watch``, ``core/indexer``,
  ``core/sources``) know no record kind; the watcher asks the registry which folders to watch.
* The HTTP listener (``http/``) serves through the daemon's ``McpApp`` and the page's routes: it imports no
  record kind, no index and no engine, and only the serving layer and the CLI import it.
* The page (``web/``) goes through the kinds' APIs and answers: no index, no engine internals, no serving
  layer, no listener.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHIM = REPO / "shim" / "memoryd_shim"
DAEMON = REPO / "daemon" / "memoryd"
INDEX = DAEMON / "index"
INDEX_ONLY = {"lancedb", "onnxruntime", "onnx", "tokenizers"}
STDLIB = set(sys.stdlib_module_names)


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """``(line, dotted name)`` for every import in ``path``, absolute or relative (as ``.name``), plus
    ``importlib.import_module("x")`` / ``__import__("x")`` calls with a literal name."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.lineno, "." * node.level + (node.module or "")))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value))
    return found


def top(name: str) -> str:
    return name.split(".")[0]


def test_the_sources_are_where_we_look():
    assert (SHIM / "__init__.py").is_file() and (SHIM / "relay.py").is_file()
    assert (DAEMON / "__init__.py").is_file() and INDEX.is_dir()


def test_shim_imports_only_the_standard_library_and_never_memoryd():
    offenders = []
    for path in sorted(SHIM.rglob("*.py")):
        for line, name in imported_modules(path):
            if name.startswith("."):
                continue  # relative: inside memoryd_shim
            root = top(name)
            if root == "memoryd_shim" or (root in STDLIB and root != "memoryd"):
                continue
            offenders.append(f"{path.relative_to(REPO)}:{line} imports {name}")
    assert not offenders, "memoryd_shim must be standard library only:\n" + "\n".join(offenders)


def test_heavy_native_packages_only_in_the_index_package():
    offenders = []
    for path in sorted(DAEMON.rglob("*.py")):
        if INDEX in path.parents:
            continue
        for line, name in imported_modules(path):
            if top(name) in INDEX_ONLY:
                offenders.append(f"{path.relative_to(REPO)}:{line} imports {name}")
    for path in sorted(SHIM.rglob("*.py")):
        for line, name in imported_modules(path):
            if top(name) in INDEX_ONLY:
                offenders.append(f"{path.relative_to(REPO)}:{line} imports {name}")
    assert not offenders, (
        "only daemon/memoryd/index/ may import "
        + ", ".join(sorted(INDEX_ONLY))
        + ":\n"
        + "\n".join(offenders)
    )


def test_only_the_logs_module_imports_structlog():
    # structlog's own default prints to stdout (the shim's and hooks' protocol); memoryd.logs.get_logger
    # configures JSON on stderr before handing out the first logger, so every logger must come from it
    offenders = [
        f"{path.relative_to(REPO)}:{line} imports {name}"
        for path in sorted(DAEMON.rglob("*.py"))
        if path != DAEMON / "logs.py"
        for line, name in imported_modules(path)
        if top(name) == "structlog"
    ]
    assert not offenders, "only memoryd/logs.py may import structlog:\n" + "\n".join(offenders)


def test_the_checker_sees_every_import_form(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os, lancedb.table\nfrom . import x\nfrom ..y import z\nfrom memoryd.paths import resolve\n"
        "def f():\n    import onnxruntime as ort\n    importlib.import_module('tokenizers')\n    __import__('onnx')\n"
    )
    names = [name for _, name in imported_modules(sample)]
    assert names == ["os", "lancedb.table", ".", "..y", "memoryd.paths", "onnxruntime", "tokenizers", "onnx"]


@pytest.mark.parametrize(
    "modules",
    [
        "memoryd_shim.relay",  # the start-up path
        "memoryd_shim.relay, memoryd_shim.connect, memoryd_shim.spawn, memoryd_shim.options",
    ],
)
def test_a_live_shim_loads_nothing_outside_the_standard_library(modules):
    code = (
        "import sys; before = set(sys.modules)\n"
        f"import {modules}\n"
        "print('\\n'.join(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = {top(name) for name in out.split()}
    outside = sorted(name for name in loaded if name not in STDLIB and name != "memoryd_shim")
    assert not outside, f"the shim loaded non-stdlib modules: {outside}"
    assert "memoryd" not in loaded


def test_the_shim_fast_path_skips_heavy_stdlib_modules():
    # Not a rule of the contract but of the 50 ms start-up budget: each of these costs milliseconds
    # (json and socket pull in re and enum), so the shim uses the C modules _json and _socket instead.
    code = "import sys; import memoryd_shim.relay, memoryd_shim.options; print(' '.join(sorted(sys.modules)))"
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.split()
    )
    heavy = {"asyncio", "subprocess", "argparse", "pathlib", "typing", "threading", "logging", "ctypes"}
    heavy |= {"json", "re", "enum", "socket", "selectors", "signal", "collections", "contextlib"}
    assert not (loaded & heavy), f"heavy modules on the shim's start-up path: {sorted(loaded & heavy)}"


def test_the_tool_registry_loads_no_index_library():
    # The daemon builds the registry before it binds its socket: agents' handshakes are answered at once,
    # while LanceDB and the model load in the background. A tool module importing the index
    # (lancedb + pyarrow: ~2 s) would delay every first connect.
    code = (
        "import sys; from memoryd.tools import build_registry; build_registry()\n"
        "print(' '.join(sorted(sys.modules)))"
    )
    loaded = {top(name) for name in subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()}  # fmt: skip
    assert not loaded & (INDEX_ONLY | {"pyarrow", "lance", "numpy"}), sorted(
        loaded & (INDEX_ONLY | {"pyarrow"})
    )


#: package (under daemon/memoryd/) -> the memoryd modules it must never import (prefix match).
LAYERS = {
    "kinds": ("memoryd.core.engine", "memoryd.serve", "memoryd.cli", "memoryd.http"),
    "board": (
        "memoryd.core",
        "memoryd.serve",
        "memoryd.cli",
        "memoryd.kinds",
        "memoryd.index",
        "memoryd.tools",
        "memoryd.http",
    ),
    "index": (
        "memoryd.core",
        "memoryd.serve",
        "memoryd.cli",
        "memoryd.kinds",
        "memoryd.tools",
        "memoryd.http",
    ),
    "tools": ("memoryd.core.engine", "memoryd.serve", "memoryd.cli", "memoryd.kinds", "memoryd.http"),
    "importers": ("memoryd.core.engine", "memoryd.serve", "memoryd.cli", "memoryd.http"),
    "core": ("memoryd.serve", "memoryd.cli", "memoryd.http"),
    "serve": ("memoryd.cli",),
    "http": ("memoryd.cli", "memoryd.index", "memoryd.kinds", "memoryd.core.engine"),
    # the page reads and deletes through the kinds' APIs and answers, never the index, the engine's
    # internals, the serving layer or the listener it is mounted in
    "web": (
        "memoryd.index",
        "memoryd.core.engine",
        "memoryd.core.indexer",
        "memoryd.serve",
        "memoryd.cli",
        "memoryd.http",
    ),
}


def _imports_of(package: str):
    for path in sorted((DAEMON / package).rglob("*.py")):
        for line, name in imported_modules(path):
            yield path, line, name


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_each_layer_imports_only_what_is_below_it(package):
    assert (DAEMON / package / "__init__.py").is_file(), f"daemon/memoryd/{package}/ is missing"
    forbidden = LAYERS[package]
    offenders = [
        f"{path.relative_to(REPO)}:{line} imports {name}"
        for path, line, name in _imports_of(package)
        if any(name == f or name.startswith(f + ".") for f in forbidden)
    ]
    assert not offenders, f"daemon/memoryd/{package}/ must not import {', '.join(forbidden)}:\n" + "\n".join(
        offenders
    )


#: The watcher, the writer and the registry of record sources know no record kind: every kind reaches the
#: index the same way, through its source (the registry loads the sources by module name).
KIND_BLIND = ("core/watch.py", "core/indexer.py", "core/sources.py")
#: The brief and task ids of the file gate (``board/gate``): names of record kinds' ids.
ID_NAMES = frozenset(
    {
        "TASK_ID_PATTERN",
        "BRIEF_ID_PATTERN",
        "InvalidId",
        "check_task_id",
        "check_brief_id",
        "is_task_id",
        "is_brief_id",
    }
)


def id_names_used(path: Path) -> list[tuple[int, str]]:
    """``(line, name)`` for every name of :data:`ID_NAMES` that ``path`` imports or uses (as a bare name or
    an attribute; docstrings and comments do not count)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name in ID_NAMES]
        elif isinstance(node, ast.Name) and node.id in ID_NAMES:
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute) and node.attr in ID_NAMES:
            found.append((node.lineno, node.attr))
    return found


@pytest.mark.parametrize("module", KIND_BLIND)
def test_the_watcher_and_the_writer_know_no_record_kind(module):
    path = DAEMON / module
    offenders = [
        f"{path.relative_to(REPO)}:{line} imports {name}"
        for line, name in imported_modules(path)
        if name == "memoryd.kinds" or name.startswith("memoryd.kinds.")
    ]
    offenders += [
        f"{path.relative_to(REPO)}:{line} uses the id rule {name}" for line, name in id_names_used(path)
    ]
    assert not offenders, "\n".join(offenders)


def test_the_id_checker_sees_imports_names_and_attributes(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""is_brief_id in a docstring does not count."""\n'
        "from memoryd.board.gate import Skipped, is_brief_id\n"
        "from memoryd.board import gate\n"
        "ok = gate.check_task_id('t')  # is_task_id in a comment does not count\n"
        "pattern = BRIEF_ID_PATTERN\n"
    )
    assert sorted(id_names_used(sample)) == [
        (2, "is_brief_id"),
        (4, "check_task_id"),
        (5, "BRIEF_ID_PATTERN"),
    ]


def test_the_watcher_asks_the_registry_which_folders_to_watch():
    names = {name for _, name in imported_modules(DAEMON / "core" / "watch.py")}
    assert "memoryd.core.sources" in names
    text = (DAEMON / "core" / "watch.py").read_text()
    for folder in ("briefs", "tasks", "memories", "sessions"):
        assert f'"{folder}"' not in text, f"core/watch.py names the board folder {folder!r}"


def test_the_shared_top_level_modules_import_no_layer():
    offenders = []
    for path in sorted(DAEMON.glob("*.py")):
        if path.name == "__main__.py":
            continue  # the entry point runs the CLI
        for line, name in imported_modules(path):
            if top(name) == "memoryd" and name.split(".")[1:2] and name.split(".")[1] in LAYERS | {"cli": ()}:
                offenders.append(f"{path.relative_to(REPO)}:{line} imports {name}")
    assert not offenders, (
        "settings, paths, logs, errors, locks, project are used by all layers:\n" + "\n".join(offenders)
    )


def test_the_layer_checker_catches_a_kind_importing_the_engine(tmp_path, monkeypatch):
    kinds = tmp_path / "daemon" / "memoryd" / "kinds"
    kinds.mkdir(parents=True)
    (kinds / "__init__.py").write_text("")
    (kinds / "bad.py").write_text("from memoryd.core.engine import Engine\nimport memoryd.serve.app\n")
    monkeypatch.setattr(sys.modules[__name__], "DAEMON", tmp_path / "daemon" / "memoryd")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    with pytest.raises(AssertionError, match=r"kinds/bad.py:1 imports memoryd.core.engine"):
        test_each_layer_imports_only_what_is_below_it("kinds")
