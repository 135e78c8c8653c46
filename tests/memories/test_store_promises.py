"""What a stored memory promises, end to end (real daemon, real shims, real LanceDB):

* it is searchable when ``store_memory`` returns, also while other agents store at the same time (their
  writes are batched together; new rows are found through the in-memory keyword tail, not the text
  indexes, until the next refresh), and it is returned once;
* a ``kill -9`` right after the answer loses nothing: the file is on the board, and the next daemon
  indexes it (the row LanceDB already holds outside the text indexes, and the board file).

Keyword-only daemons (``--model none``): the promises are the index's and the board's, not the model's.
"""

from __future__ import annotations

import shutil
import signal
import threading

from support.daemon import DaemonProcess, short_tmpdir
from support.memories import MemShim, unique, wait_engine_ready


def found(shim: MemShim, word: str) -> list[str]:
    hits = [m["id"] for m in shim.ok("search_memories", query=word, limit=20)]
    assert len(hits) == len(set(hits)), hits
    return hits


def test_stores_from_several_shims_at_once_are_searchable_when_each_call_returns():
    root = short_tmpdir()
    daemon = DaemonProcess(root)
    try:
        daemon.start()
        wait_engine_ready(daemon)
        failures: list[str] = []
        stored: dict[str, str] = {}

        def agent(k: int) -> None:
            try:
                stores(k)
            except Exception as exc:  # a thread's exception would not fail the test
                failures.append(f"agent {k}: {exc!r}")

        def stores(k: int) -> None:
            with MemShim(daemon.socket, daemon.env).initialize() as s:
                for n in range(8):
                    word = unique(f"zqa{k}n{n}x")
                    memory = s.ok(
                        "store_memory", content=f"note {n} of agent {k}: {word} flaky test fixed", tags=["ci"]
                    )
                    hits = found(s, word)
                    if hits != [memory["id"]]:
                        failures.append(f"agent {k} store {n}: {word} -> {hits}")
                    stored[word] = memory["id"]

        threads = [threading.Thread(target=agent, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not failures, failures
        assert len(stored) == 32
        with MemShim(daemon.socket, daemon.env).initialize() as s:
            for word, mid in stored.items():  # every one, once, from any agent
                assert found(s, word) == [mid], word
            assert len(set(found(s, "flaky test fixed"))) == 20  # the limit, no row twice
    finally:
        daemon.kill()
        shutil.rmtree(root, ignore_errors=True)


def test_a_kill_9_right_after_an_acknowledged_store_loses_nothing():
    root = short_tmpdir()
    index = root / "index"
    daemon = DaemonProcess(root, index=index)
    try:
        daemon.start()
        wait_engine_ready(daemon)
        with MemShim(daemon.socket, daemon.env).initialize() as s:
            s.ok("store_memory", content="an older note about the release checklist", tags=["release"])
            word = unique("zqkill")
            memory = s.ok(
                "store_memory", content=f"the {word} cache must be warmed before deploys", tags=["ops"]
            )
            daemon.signal(signal.SIGKILL)  # at once: no refresh, no flush, no clean shutdown
        daemon.wait_exit(10)
        assert (daemon.board / "memories" / f"{memory['id']}.md").is_file()
        again = DaemonProcess(root, board=daemon.board, index=index)
        again.start()
        try:
            wait_engine_ready(again)
            with MemShim(again.socket, again.env).initialize() as s:
                assert found(s, word) == [memory["id"]]
                assert s.ok("get_memory", hash=memory["id"])["content"].startswith(f"the {word}")
        finally:
            again.kill()
    finally:
        daemon.kill()
        shutil.rmtree(root, ignore_errors=True)
