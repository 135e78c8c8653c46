"""What every record kind's files share (contract §3): the board is a folder of plain files that is the truth.

``ids`` (id patterns), ``gate`` (the one gate for every file read), ``atomic`` (temp file, fsync, rename),
``sweep`` (the temp files a killed writer left). Each kind's own format lives in ``memoryd.kinds``.
See docs/board.md.
"""
