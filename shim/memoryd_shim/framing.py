"""Newline framing with a cap: bytes in, whole lines out, memory bounded by the cap.

A line longer than the cap is not buffered: once it passes the cap only its first ``head_bytes`` are
kept (enough to find its id), the rest is skipped up to its newline, and it comes out as a
:class:`TooLong` instead of a line.
"""

from __future__ import annotations


class TooLong:
    """A line over the cap: ``length`` bytes (newline excluded) and its first bytes, ``head``."""

    __slots__ = ("head", "length")

    def __init__(self, head: bytes, length: int):
        self.head = head
        self.length = length


class LineBuffer:
    """Split a byte stream into newline-terminated lines of at most ``cap`` bytes (newline excluded).

    ``feed(data)`` returns the lines completed by ``data`` (``bytes`` ending in ``b"\\n"``, or
    :class:`TooLong`); ``finish()`` returns what an unterminated last line left, newline added.
    """

    def __init__(self, cap: int, head_bytes: int = 64 * 1024):
        self.cap = cap
        self.head_bytes = head_bytes
        self.buf = bytearray()
        self._skipping: TooLong | None = None  # set while skipping the rest of an over-long line

    def feed(self, data: bytes) -> list[bytes | TooLong]:
        out: list[bytes | TooLong] = []
        if self._skipping is not None:
            nl = data.find(b"\n")
            if nl < 0:
                self._skipping.length += len(data)
                return out
            self._skipping.length += nl
            out.append(self._skipping)
            self._skipping = None
            data = data[nl + 1 :]
        buf = self.buf
        scan = len(buf)  # earlier bytes hold no newline: search only the new ones
        buf += data
        start = 0
        while True:
            nl = buf.find(b"\n", scan)
            if nl < 0:
                break
            if nl - start > self.cap:
                out.append(TooLong(bytes(buf[start : start + self.head_bytes]), nl - start))
            else:
                out.append(bytes(buf[start : nl + 1]))
            start = scan = nl + 1
        del buf[:start]
        if len(buf) > self.cap:
            self._skipping = TooLong(bytes(buf[: self.head_bytes]), len(buf))
            buf.clear()
        return out

    def finish(self) -> list[bytes | TooLong]:
        """At end of stream: the unterminated last line (newline added) or its :class:`TooLong`."""
        out: list[bytes | TooLong] = []
        if self._skipping is not None:
            out.append(self._skipping)
            self._skipping = None
        elif self.buf:
            out.append(bytes(self.buf) + b"\n")
        self.buf.clear()
        return out

    def clear(self) -> None:
        """Forget everything buffered (the stream it came from is gone)."""
        self.buf.clear()
        self._skipping = None

    def __len__(self) -> int:
        return len(self.buf)
