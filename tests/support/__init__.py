"""What the tests share: one real daemon process (:mod:`.daemon`), shims and raw JSON-RPC sessions
(:mod:`.briefs`, :mod:`.shim`, :mod:`.memories`), an in-process SDK session for tool-level tests (:mod:`.inprocess`) and an in-process daemon whose
sessions the raw-line shims and the SDK client speak to (:mod:`.inprocess_daemon`), boards and secrets to plant (:mod:`.board`, :mod:`.privacy`,
:mod:`.layouts`, :mod:`.importers`) and the npm helpers of the real-client tests (:mod:`.npm`).

Importable as ``support`` from every test (``pythonpath`` in pyproject.toml): no ``sys.path`` edits.
"""
