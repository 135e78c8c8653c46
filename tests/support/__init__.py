"""What the tests and the benchmarks share: one real daemon process and the first MCP messages
(:mod:`.daemon`, with :mod:`.measure` for readiness and RSS), shims and raw JSON-RPC sessions
(:mod:`.briefs`, :mod:`.shim`, :mod:`.memories`; without a shim: :mod:`.sockets`), an in-process SDK session for tool-level tests
(:mod:`.inprocess`) and an in-process daemon whose sessions the raw-line shims and the SDK client speak to
(:mod:`.inprocess_daemon`), boards and secrets to plant (:mod:`.board`, :mod:`.privacy`, :mod:`.layouts`,
:mod:`.importers`) and the npm helpers of the real-client tests (:mod:`.npm`).

Importable as ``support`` with no ``sys.path`` edits: from tests through ``pythonpath`` in pyproject.toml,
and from any program of the checkout's ``.venv`` (``bench/`` scripts) because the editable install that
``make setup`` makes puts ``tests/`` on the path (``dev-mode-dirs``); a built wheel does not ship it.
"""
