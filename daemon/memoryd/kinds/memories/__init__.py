"""Memories: facts, decisions and lessons agents store on the board and link into a graph.

* :mod:`.format` and :mod:`.files` -- the file format (``memories/<hash>.md``) and its I/O;
* :mod:`.source` and :mod:`.records` -- the record source feeding the index, and the in-memory view;
* :mod:`.api` -- :class:`~memoryd.kinds.memories.api.Memories`, the API every memory and memo tool calls
  (store, get, update, delete, search, recall, relationships, stats), built from the board, the record
  sources, the writer and the searcher it is handed; :mod:`.writes` -- the board side of each write;
* :mod:`.graph`, :mod:`.ranking`, :mod:`.rules`, :mod:`.access` -- graph walks, the importance/recency
  re-rank, memdb's limits, lazy ``accessed_at``;
* :mod:`.tools`, :mod:`.render`, :mod:`.schemas` -- memdb's twelve tools.
"""
