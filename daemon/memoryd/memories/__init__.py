"""Memories (issue 5): facts, decisions and lessons agents store on the board and link into a graph.

* :mod:`memoryd.board.memories` — the file format (``memories/<hash>.md``) and its I/O;
* :mod:`memoryd.memories.source` — the record source feeding the index, and the in-memory view;
* :mod:`memoryd.memories.api` — :class:`~memoryd.memories.api.Memories`, the engine-level API every tool
  calls (``engine.memories``): store, get, update, delete, search, recall, relationships, stats;
* :mod:`memoryd.memories.graph`, :mod:`memoryd.memories.ranking`, :mod:`memoryd.memories.project` —
  graph walks, the importance/recency re-rank, and the session's project from its working directory.
"""
