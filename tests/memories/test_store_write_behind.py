"""A store answers before its embedding and row write, and still keeps every promise (real daemon with the
real model, real shims, real LanceDB):

* searchable by meaning when ``store_memory`` returns: a search started after the answer waits for the
  index writes acknowledged before it (the read barrier), so a paraphrase sharing no word with the memory
  finds it at once;
* the same for many agents storing at once (their writes are embedded and written together);
* ``kill -9`` right after the answer, before the embedding could finish: the next daemon indexes the
  board file, and the paraphrase finds it once the model is warm;
* SIGTERM with writes still queued: they are flushed (or, past the shutdown budget, left to the board),
  and every one is found after a restart.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time

import pytest

from support.daemon import DaemonProcess, short_tmpdir
from support.memories import DISTRACTORS, MemShim, poll, unique, wait_engine_ready, wait_hybrid

#: (memory, a question about it sharing no word with it): only the vector half can match. Each store
#: is searched before the next one, so each is embedded alone (the int8 model's activations are scaled
#: per batch) and the store holds the same vectors at every run: what the search finds is fixed.
PARAPHRASES = [("The cat sleeps on the sofa all afternoon", "my kitten naps on the couch during the day")]


def start_warm(root, **kw) -> DaemonProcess:
    daemon = DaemonProcess(root, model="", **kw)
    daemon.start()
    wait_hybrid(daemon)
    return daemon


@pytest.fixture(scope="module")
def warm(models_dir):
    root = short_tmpdir()
    daemon = start_warm(root, env={"MEMORYD_MODELS": str(models_dir)})
    try:
        yield daemon
    finally:
        daemon.kill()
        shutil.rmtree(root, ignore_errors=True)


class Restarts:
    """Daemons on one short root, board and index, all killed and the root removed after the test:
    :meth:`warm` starts one with the model (ready for hybrid search), :meth:`keyword` one without it
    (what a restart's reconcile wrote is searchable by keyword before any model loads)."""

    def __init__(self, models_dir) -> None:
        self.root = short_tmpdir()
        self.env = {"MEMORYD_MODELS": str(models_dir)}
        self.index = self.root / "index"
        self.made: list[DaemonProcess] = []

    def warm(self, **kw) -> DaemonProcess:
        self.made.append(start_warm(self.root, env=self.env, index=self.index, **kw))
        return self.made[-1]

    def keyword(self, board) -> DaemonProcess:
        again = DaemonProcess(self.root, board=board, index=self.index)
        self.made.append(again)
        again.start()
        wait_engine_ready(again)
        return again

    def close(self) -> None:
        for d in self.made:
            d.kill()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def restarts(models_dir):
    r = Restarts(models_dir)
    try:
        yield r
    finally:
        r.close()


def ids(shim: MemShim, query: str, limit: int = 10) -> list[str]:
    return [m["id"] for m in shim.ok("search_memories", query=query, limit=limit)]


def test_a_stored_memory_is_found_by_a_paraphrase_as_soon_as_the_store_returns(warm):
    with MemShim(warm.socket, warm.env).initialize() as s:
        for text in DISTRACTORS:
            s.ok("store_memory", content=text, tags=["misc"])
            assert ids(s, "xqzv blorft") == []
        for content, question in PARAPHRASES:
            stored = s.ok("store_memory", content=content, tags=["misc"])
            full = s.full("search_memories", query=question)
            assert full["mode"] == "hybrid"
            assert stored["id"] in [m["id"] for m in full["result"]], (question, full["result"])


def test_a_long_memory_is_indexed_before_its_store_answers(warm):
    """Flow control counts text, not files: one memory longer than the backlog's text bound waits for its
    own embedding, so a few long stores cannot leave the next search (any agent's) a long wait."""
    words = " ".join(unique(f"zqlong{k}x") for k in range(2500))  # ~25,000 characters, many passages
    with MemShim(warm.socket, warm.env).initialize() as s:
        before = warm.status()["engine"]["records"]
        s.ok("store_memory", content=f"a long design note: {words}", tags=["long"])
        # the status line reads the index as it is, without the read barrier
        assert warm.status()["engine"]["records"] > before


def test_stores_from_sixteen_agents_at_once_are_all_found_by_the_next_search(warm):
    failures: list[str] = []
    stored: dict[str, str] = {}
    tag = unique("zqburst")
    go = threading.Barrier(16)

    def agent(k: int) -> None:
        try:
            with MemShim(warm.socket, warm.env).initialize() as s:
                word = unique(f"zqa{k}x")
                go.wait(60)  # every agent stores at the same moment
                memory = s.ok("store_memory", content=f"agent {k} noted {word} about {tag}", tags=["burst"])
                stored[word] = memory["id"]
                if memory["id"] not in ids(s, word):
                    failures.append(f"agent {k}: {word} not found right after its store")
        except Exception as exc:  # a thread's exception would not fail the test
            failures.append(f"agent {k}: {exc!r}")

    threads = [threading.Thread(target=agent, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert not failures, failures
    assert len(stored) == 16
    with MemShim(warm.socket, warm.env).initialize() as s:
        assert set(stored.values()) <= set(ids(s, tag, limit=50))
        assert s.ok("memory_stats")["memoryCount"] >= 16


def test_a_kill_9_right_after_the_answer_loses_nothing_and_the_restart_embeds_it(restarts):
    daemon = restarts.warm()
    content, question = PARAPHRASES[0]
    word = unique("zqkill")  # also tells the memory apart from any other
    with MemShim(daemon.socket, daemon.env).initialize() as s:
        memory = s.ok("store_memory", content=f"{content} ({word})", tags=["ops"])
        daemon.signal(signal.SIGKILL)  # at once: the embedding and the row write were still to come
    daemon.wait_exit(10)
    assert (daemon.board / "memories" / f"{memory['id']}.md").is_file()
    again = restarts.warm(board=daemon.board)
    with MemShim(again.socket, again.env).initialize() as s:
        assert ids(s, word) == [memory["id"]]
        # the reconcile ran before the model loaded; the backfill gives the row its vector
        poll(lambda: memory["id"] in ids(s, question), "found by meaning after the restart", timeout=180)


def test_sigterm_with_index_writes_still_queued_loses_nothing(restarts):
    daemon = restarts.warm()
    word = unique("zqterm")
    with MemShim(daemon.socket, daemon.env).initialize() as s:
        batch = s.ok(
            "store_memories",
            items=[
                {"content": f"queued note {n} before the stop {word}", "tags": ["stop"]} for n in range(24)
            ],
        )
        single = s.ok("store_memory", content=f"the last note before the stop {word}", tags=["stop"])
        daemon.signal(signal.SIGTERM)  # the batch's embedding is still running or queued
    daemon.wait_exit(30)
    expected = {single["id"], *(r["id"] for r in batch["results"])}
    assert len(expected) == 25, batch
    again = restarts.keyword(daemon.board)  # keyword-only: the rows, not the model
    with MemShim(again.socket, again.env).initialize() as s:
        assert set(ids(s, word, limit=50)) == expected


def test_a_batch_is_on_disk_and_found_whole_as_soon_as_it_is_answered(warm):
    """50 memories (over the writer's path bound) in one call: every file is on the board when the call
    answers, and a search started right after finds all of them; a second batch right behind the first
    (its files written while the first is embedded) likewise."""
    with MemShim(warm.socket, warm.env).initialize() as s:
        for round_ in range(2):
            word = unique(f"zqbatch{round_}x")
            items = [{"content": f"batch note {n} of {word}", "tags": ["batch"]} for n in range(50)]
            answer = s.ok("store_memories", items=items)
            stored = [r["id"] for r in answer["results"]]
            assert answer["succeeded"] == 50 and len(set(stored)) == 50
            assert all((warm.board / "memories" / f"{i}.md").is_file() for i in stored)
            assert set(ids(s, word, limit=100)) == set(stored)


def test_a_batch_mixing_stored_repeated_new_and_invalid_items_is_on_disk_and_searchable_when_answered(warm):
    """Right after the call, without waiting: every item that succeeded is on the board and found by the
    next search; an item whose content is already stored answers that memory (and its new tag is on the
    file and in the tag filter at once); content repeated inside the batch is one memory; invalid items
    fail alone. One log line tells the board pass, none per file."""
    word = unique("zqmixed")
    old = [f"already stored note {n} on {word}" for n in range(3)]
    with MemShim(warm.socket, warm.env).initialize() as s:
        before = {text: s.ok("store_memory", content=text, tags=["old"])["id"] for text in old}
        logged = len(warm.events("board.memories_stored"))
        files_logged = len(warm.events("board.memory_written"))
        items = [
            {"content": old[0], "tags": ["old"]},
            {"content": old[1], "tags": ["old", unique("zqextra")]},
            *({"content": f"new note {n} on {word}", "tags": ["new"]} for n in range(20)),
            {"content": "   ", "tags": ["new"]},  # blank: fails alone
            {"content": f"new note 7 on {word}", "tags": ["again"]},  # repeats an item of this batch
            {"content": f"untagged note on {word}", "tags": []},  # memdb wants a tag: fails alone
            {"content": old[2], "tags": ["old"]},
        ]
        answer = s.ok("store_memories", items=items)
        results = answer["results"]
        # at once, before anything else is asked of the daemon: the files, then one search
        ok = {r["index"]: r for r in results if r["ok"]}
        on_disk = {i: (warm.board / "memories" / f"{r['id']}.md").is_file() for i, r in ok.items()}
        found = set(ids(s, word, limit=100))
        assert answer["succeeded"] == 24 and answer["failed"] == 2, answer
        assert [r["index"] for r in results if not r["ok"]] == [22, 24]
        assert all(on_disk.values()), on_disk
        assert [ok[i]["id"] for i in (0, 1, 25)] == [before[t] for t in old]
        assert not any(ok[i]["isNew"] for i in (0, 1, 25))
        assert all(ok[i]["isNew"] for i in range(2, 22))
        assert ok[23]["id"] == ok[9]["id"] and ok[23]["isNew"] is False
        assert found == {r["id"] for r in ok.values()}  # 3 stored before + 20 new
        assert len(found) == 23
        extra = items[1]["tags"][1]
        assert extra in (warm.board / "memories" / f"{before[old[1]]}.md").read_text()
        assert [m["id"] for m in s.ok("search_memories", query=word, tags=[extra])] == [before[old[1]]]
        assert set(ids(s, word, limit=100)) >= {ok[9]["id"]}
        tagged = s.ok("search_memories", query=word, tags=["again"], limit=100)
        assert [m["id"] for m in tagged] == [ok[9]["id"]]  # the repeat's tag joined the memory
    lines = warm.events("board.memories_stored")[logged:]
    assert [(e["new"], e["existing"], e["failed"]) for e in lines] == [(20, 4, 2)], lines
    # the files are created at debug level only
    assert not any(e["new"] for e in warm.events("board.memory_written")[files_logged:])


def test_a_kill_9_right_after_a_batch_is_answered_loses_none_of_it(restarts):
    daemon = restarts.warm()
    words = [unique("zqbatchkilla"), unique("zqbatchkillb")]  # one per batch: 50 hits a search
    with MemShim(daemon.socket, daemon.env).initialize() as s:
        batches = [
            s.ok("store_memories", items=[{"content": f"{n} {w}", "tags": ["k"]} for n in range(50)])
            for w in words
        ]
        daemon.signal(signal.SIGKILL)  # the second batch's embedding had at most begun
    daemon.wait_exit(10)
    expected = [{r["id"] for r in b["results"]} for b in batches]
    assert [len(e) for e in expected] == [50, 50]
    for w, e in zip(words, expected, strict=True):
        for i in e:  # whole files, as written: the temp was fsynced before its link
            assert (daemon.board / "memories" / f"{i}.md").read_text().count(w) == 1
    again = restarts.keyword(daemon.board)  # keyword-only: the reconcile
    with MemShim(again.socket, again.env).initialize() as s:
        for w, e in zip(words, expected, strict=True):
            assert set(ids(s, w, limit=100)) == e


def test_a_hand_edit_right_after_a_store_is_indexed_though_the_watcher_echo_of_the_store_is_not_reread(warm):
    """The writer skips the watcher's echo of a store whose file it read as it still is; an edit made at
    once after the store (in place: same inode, new size and times) is a different file and is read."""
    with MemShim(warm.socket, warm.env).initialize() as s:
        before, after = unique("zqechoa"), unique("zqechob")
        stored = s.ok("store_memories", items=[{"content": f"note {before}", "tags": ["echo"]}])
        path = warm.board / "memories" / f"{stored['results'][0]['id']}.md"
        path.write_text(path.read_text().replace(before, f"{after} edited by hand"))

        def edited() -> bool:  # the search answers the memory as the index holds it
            found = s.ok("search_memories", query=after)
            return any(m["id"] == stored["results"][0]["id"] and after in m["content"] for m in found)

        poll(edited, "the hand edit indexed", timeout=30)


def test_an_editors_saves_of_batch_stored_files_are_indexed(warm):
    """The watcher drops the link that creates each file of a batch (the writer reads those files
    anyway); an editor's save afterwards, by temp file + rename or in place, is still seen and indexed."""
    with MemShim(warm.socket, warm.env).initialize() as s:
        word, renamed, in_place = unique("zqsavea"), unique("zqsaveb"), unique("zqsavec")
        items = [{"content": f"saved note {n} of {word}", "tags": ["save"]} for n in range(20)]
        stored = [r["id"] for r in s.ok("store_memories", items=items)["results"]]
        assert set(ids(s, word, limit=50)) == set(stored)
        first, second = (warm.board / "memories" / f"{i}.md" for i in stored[:2])
        tmp = first.with_name(f".{first.name}.swp")  # temp + rename, as vim and most editors save
        tmp.write_text(first.read_text().replace(word, f"{renamed} saved by an editor"))
        os.replace(tmp, first)
        second.write_text(second.read_text().replace(word, f"{in_place} saved in place"))

        def indexed(memory_id: str, text: str) -> bool:
            return any(
                m["id"] == memory_id and text in m["content"] for m in s.ok("search_memories", query=text)
            )

        poll(lambda: indexed(stored[0], renamed), "the renamed save indexed", timeout=30)
        poll(lambda: indexed(stored[1], in_place), "the in-place save indexed", timeout=30)


def test_the_access_times_a_search_leaves_are_written_a_chunk_per_hold_of_the_write_lock(warm):
    """40 memories returned by one search: their access times reach their files in the background, in
    chunks of at most TOUCH_CHUNK (a store waits for one chunk, not for all of them), and a store made
    meanwhile is on disk and found when it answers."""
    from memoryd.kinds.memories.api import TOUCH_CHUNK

    logged = len(warm.events("board.accessed_at_written"))
    word = unique("zqtouchx")
    with MemShim(warm.socket, warm.env).initialize() as s:
        items = [{"content": f"touched note {n} of {word}", "tags": ["touch"]} for n in range(40)]
        stored = [r["id"] for r in s.ok("store_memories", items=items)["results"]]
        time.sleep(1.1)  # access times have whole seconds: one equal to the creation time is not written
        hits = s.ok("search_memories", query=word, limit=50)
        assert {h["id"] for h in hits} == set(stored)
        seen = {h["id"]: h["accessed_at"] for h in hits}

        def written() -> bool:
            return sum(e["files"] for e in warm.events("board.accessed_at_written")[logged:]) >= 40

        poll(written, "the 40 access times written")
        chunks = [e["files"] for e in warm.events("board.accessed_at_written")[logged:]]
        assert len(chunks) >= 2 and max(chunks) <= TOUCH_CHUNK, chunks
        for mid in stored:
            assert f"accessed_at: '{seen[mid]}'" in (warm.board / "memories" / f"{mid}.md").read_text()
        late = s.ok("store_memory", content=f"stored after the touches of {word}", tags=["touch"])["id"]
        assert late in ids(s, word, limit=100)
