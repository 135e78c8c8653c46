"""Briefs and tasks: what the developer asked (``briefs/<id>/``), filed by task (``tasks/<id>.json``), and
the outcomes agents report. :mod:`.files` (the format), :mod:`.source` (read a board, tolerating broken
files, into index records), :mod:`.writer` (``save_outcome``, an empty board), :mod:`.tools`, :mod:`.render`,
:mod:`.schemas`.
"""
