"""What every record kind's files share (contract §3): the board is a folder of plain files that is the truth.

``gate`` (the one gate for every file read, and the id patterns: the only strings that may become path
components), ``atomic`` (temp file, fsync, rename). Each kind's own format lives in ``memoryd.kinds``.
See docs/board.md.
"""
