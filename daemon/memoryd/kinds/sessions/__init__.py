"""Agent sessions: each turn as an interaction (``sessions/<id>.jsonl``) and a summary per session.
:mod:`.format` and :mod:`.files` (the files), :mod:`.source` and :mod:`.records` (index records), the
Memory Core tools (:mod:`.tools`, :mod:`.render`, :mod:`.schemas`, :mod:`.summarize`), ``healthcheck``
(:mod:`.health`) and the export/import tools (:mod:`.exchange`).
"""
