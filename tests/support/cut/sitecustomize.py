"""Imported at start-up by a Python process that has this folder on ``PYTHONPATH`` (tests only): cuts the
process at one point of its board writes, so a test meets the board exactly as a crash there leaves it.

``MEMORYD_TEST_CUT="<name>:<how>"``: right after a ``rename(2)`` or ``link(2)`` whose destination's last
component fully matches the regular expression ``<name>`` (``t-\\d{8}-[0-9a-f]{6}\\.json``: a new task's
file; ``said\\.txt``), ``kill`` sends the process SIGKILL; ``hold`` creates the file
``MEMORYD_TEST_CUT_HELD`` and waits (the writing thread only) until ``MEMORYD_TEST_CUT_GO`` exists, at most
a minute. The first match only.
"""

import os
import re
import signal
import threading
import time

_SPEC = os.environ.get("MEMORYD_TEST_CUT", "")
if _SPEC:
    _NAME, _, _HOW = _SPEC.rpartition(":")
    _PATTERN = re.compile(_NAME)
    _done = threading.Event()
    _real_rename, _real_replace, _real_link = os.rename, os.replace, os.link

    def _cut(dst) -> None:
        name = os.fsdecode(dst).rsplit("/", 1)[-1]
        if _done.is_set() or not _PATTERN.fullmatch(name):
            return
        _done.set()
        if _HOW == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        held, go = os.environ["MEMORYD_TEST_CUT_HELD"], os.environ["MEMORYD_TEST_CUT_GO"]
        open(held, "w").close()
        deadline = time.monotonic() + 60
        while not os.path.exists(go) and time.monotonic() < deadline:
            time.sleep(0.05)

    def _rename(src, dst, *args, **kwargs):
        _real_rename(src, dst, *args, **kwargs)
        _cut(dst)

    def _replace(src, dst, *args, **kwargs):
        _real_replace(src, dst, *args, **kwargs)
        _cut(dst)

    def _link(src, dst, *args, **kwargs):
        _real_link(src, dst, *args, **kwargs)
        _cut(dst)

    os.rename, os.replace, os.link = _rename, _replace, _link
