"""Memories are files on the board: hand edits, hand-written and broken files, restarts, and embeddings.

The daemon's watcher picks up what an editor does to ``memories/``; the bounds below catch hangs,
they do not measure speed (``bench/`` does). The daemons are served in-process
(:mod:`support.inprocess_daemon`); a restart is a clean stop (what SIGTERM runs) and a new daemon on the
same folders. The real process's signals and exit status are in ``tests/memories/test_store_promises.py``.
"""

from __future__ import annotations

import hashlib
import os
import shutil

from support.daemon import short_tmpdir
from support.inprocess_daemon import InprocessDaemon, InprocessMemShim
from support.memories import poll, unique, wait_engine_ready, wait_hybrid, warm_daemon

#: Hand edits must be searchable "within 1 s"; this bound only catches a change never picked up.
PICKUP_BOUND_S = 20.0


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def editor_save(path, text: str) -> None:
    """Save like an editor: write a sibling temp file, then rename it over the original."""
    tmp = path.with_name(path.name + ".swp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def hand_file(content: str, tags=("hand",), extra: str = "") -> str:
    tag_list = ", ".join(tags)
    return (
        f"---\ntags: [{tag_list}]\nimportance: 2\nmemory_type: fact\ncreated_at: 2026-01-05T10:00:00Z\n"
        f"project: handmade\n{extra}---\n{content}\n"
    )


def hits(shim: InprocessMemShim, query: str) -> list[str]:
    return [h["id"] for h in shim.ok("search_memories", query=query, limit=20)]  # id: the file name


def test_a_memory_edited_by_hand_is_searchable_with_its_new_words_and_not_its_old(shim, served):
    old_word, new_word = unique("old"), unique("new")
    content = f"The release train leaves on Tuesdays {old_word}"
    h = shim.ok("store_memory", content=content, tags=["release"])["hash"]
    assert hits(shim, old_word) == [h]
    path = served.board / "memories" / f"{h}.md"
    text = path.read_text()
    editor_save(path, text.replace(f"Tuesdays {old_word}", f"Thursdays now {new_word}"))
    poll(lambda: hits(shim, new_word) == [h], "the new words searchable", PICKUP_BOUND_S)
    assert hits(shim, old_word) == []
    edited = f"The release train leaves on Thursdays now {new_word}"
    m = shim.ok("get_memory", hash=h)
    # the file name stays the identity; hash says what the content is now
    assert (m["id"], m["hash"], m["content"]) == (h, sha(edited), edited)
    assert shim.ok("get_memory", hash=sha(edited))["id"] == h
    again = shim.ok("store_memory", content=edited, tags=["release"])
    assert again["isNew"] is False and again["id"] == h
    assert len(list((served.board / "memories").glob("*.md"))) == len(
        {p.name for p in (served.board / "memories").glob("*.md")}
    )
    # a tool update moves the hand-edited file to its content's name
    moved = shim.ok("update_memory", hash=h, content=edited + " (confirmed)")
    assert moved["oldHash"] == h and not path.exists()
    assert hits(shim, new_word) == [moved["newHash"]]


def test_hand_written_and_hand_deleted_memory_files(shim, served):
    word = unique("hw")
    content = f"Written by hand in an editor: the VPN needs split tunnelling {word}"
    path = served.board / "memories" / f"{sha(content)}.md"
    editor_save(path, hand_file(content, tags=("vpn", "network")))
    poll(lambda: hits(shim, word) == [sha(content)], "a hand-written memory indexed", PICKUP_BOUND_S)
    m = shim.ok("get_memory", hash=sha(content))
    assert (m["content"], m["tags"], m["project"], m["memory_type"]) == (
        content,
        ["vpn", "network"],
        "handmade",
        "fact",
    )
    assert m["created_at"] == "2026-01-05T10:00:00Z"
    path.unlink()
    poll(lambda: hits(shim, word) == [], "a deleted memory file forgotten", PICKUP_BOUND_S)
    assert shim.err("get_memory", hash=sha(content))["code"] == "E_NOT_FOUND"


def test_a_broken_memory_file_is_skipped_never_the_board(shim, served):
    good_word, bad_word = unique("good"), unique("bad")
    good = f"This one is fine {good_word}"
    bad = f"This one has broken front matter {bad_word}"
    mem = served.board / "memories"
    mem.mkdir(exist_ok=True)  # a board nothing was stored on yet has none
    before = shim.ok("memory_stats")["skippedFiles"]
    editor_save(mem / f"{sha(bad)}.md", f"---\ntags: [unclosed\nimportance: 3\n---\n{bad}\n")
    editor_save(mem / f"{sha(good)}.md", hand_file(good))
    poll(lambda: hits(shim, good_word) == [sha(good)], "the good file indexed", PICKUP_BOUND_S)
    poll(lambda: shim.ok("memory_stats")["skippedFiles"] >= before + 1, "the broken file counted as skipped")
    # a file whose name is no memory's, saved into the folder while the daemon runs: skipped, and said so
    editor_save(mem / "not-a-hash.md", hand_file("a file whose name is not a memory hash"))
    poll(
        lambda: shim.ok("memory_stats")["skippedFiles"] >= before + 2, "the misnamed file counted as skipped"
    )
    named = {s["path"]: s["reason"] for s in served.status()["engine"]["skipped"]}
    assert named.get("memories/not-a-hash.md") == "name is not <sha256 hex>.md", named
    assert hits(shim, bad_word) == []
    err = shim.err("get_memory", hash=sha(bad))
    assert err["code"] == "E_BROKEN_FILE" and "YAML" in err["message"]
    err = shim.err("get_relationships", hash=sha(bad))  # the same answer as get_memory, not "no memory"
    assert err["code"] == "E_BROKEN_FILE" and "YAML" in err["message"], err
    # fixing the file brings it in
    editor_save(mem / f"{sha(bad)}.md", hand_file(bad))
    poll(lambda: hits(shim, bad_word) == [sha(bad)], "the repaired file indexed", PICKUP_BOUND_S)
    # deleting a broken memory with the tool works too
    editor_save(mem / f"{sha(bad)}.md", "---\nimportance: eleven\n---\nx\n")
    poll(lambda: hits(shim, bad_word) == [], "the re-broken file dropped", PICKUP_BOUND_S)
    assert shim.ok("delete_memory", hash=sha(bad)) == {"deleted": True}
    assert not (mem / f"{sha(bad)}.md").exists()
    (mem / "not-a-hash.md").unlink()
    poll(lambda: shim.ok("memory_stats")["skippedFiles"] == before, "the misnamed file's removal noticed")


def test_a_front_matter_value_yaml_cannot_convert_is_a_broken_file_not_a_failed_engine():
    # valid YAML syntax whose value the loader cannot build: a date that does not exist, an over-long
    # number; one such hand edit must cost that file, never the start of every memory tool
    root = short_tmpdir()
    try:
        good, bad_date, bad_number = (f"{what} {unique('yv')}" for what in ("fine", "typo", "digits"))
        mem = root / "board" / "memories"
        mem.mkdir(parents=True)
        (mem / f"{sha(good)}.md").write_text(hand_file(good))
        (mem / f"{sha(bad_date)}.md").write_text(
            hand_file(bad_date).replace("2026-01-05T10:00:00Z", "2026-13-45")
        )
        (mem / f"{sha(bad_number)}.md").write_text(hand_file(bad_number, extra=f"ticket: {'9' * 5000}\n"))
        daemon = InprocessDaemon(root).start()
        poll(lambda: daemon.status()["engine_state"] != "starting", "the engine started or failed")
        assert daemon.status()["engine_state"] == "ready", daemon.status()["engine"]
        with InprocessMemShim(daemon).initialize() as s:
            assert hits(s, good.split()[-1]) == [sha(good)]
            assert s.ok("memory_stats")["skippedFiles"] == 2
            for text in (bad_date, bad_number):
                err = s.err("get_memory", hash=sha(text))
                assert err["code"] == "E_BROKEN_FILE", err
            # the same typo saved while the daemon runs: that memory drops out, its tools say why
            path = mem / f"{sha(good)}.md"
            editor_save(path, path.read_text().replace("2026-01-05T10:00:00Z", "2026-02-30T10:00:00Z"))
            poll(lambda: hits(s, good.split()[-1]) == [], "the re-broken file dropped", PICKUP_BOUND_S)
            assert s.err("get_memory", hash=sha(good))["code"] == "E_BROKEN_FILE"
            assert s.err("store_memory", content=good, tags=["again"])["code"] == "E_BROKEN_FILE"
            assert s.err("update_memory", hash=sha(good), importance=1)["code"] == "E_BROKEN_FILE"
        daemon.kill()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_board_moved_away_is_an_error_from_every_memory_tool_not_the_memories_it_held():
    root = short_tmpdir()
    try:
        daemon = InprocessDaemon(root).start()
        wait_engine_ready(daemon)
        word = unique("moved")
        with InprocessMemShim(daemon).initialize() as s:
            a = s.ok("store_memory", content=f"first {word}", tags=["m"])["hash"]
            b = s.ok("store_memory", content=f"second {word}", tags=["m"])["hash"]
            s.ok("create_relationship", from_hash=a, to_hash=b, relation_type="then")
            daemon.board.rename(root / "board-moved")  # chmod 000 would not stop root
            calls = {
                "search_memories": {"query": word},
                "recall": {"query": word},
                "memory_stats": {},
                "get_memory": {"hash": a},
                "get_relationships": {"hash": a},
                "store_memory": {"content": f"third {word}", "tags": ["m"]},
                "update_memory": {"hash": a, "importance": 3},
                "create_relationship": {"from_hash": b, "to_hash": a, "relation_type": "back"},
                "delete_memory": {"hash": b},
            }
            codes = {name: s.answer(name, **args)["structuredContent"] for name, args in calls.items()}
            wrong = {
                name: body
                for name, body in codes.items()
                if body.get("error", {}).get("code") != "E_BOARD_UNREADABLE"
            }
            assert not wrong, wrong  # a cached count or edge list would read as "this is what you have"
            (root / "board-moved").rename(daemon.board)
            poll(lambda: s.full("memory_stats")["result"]["memoryCount"] == 2, "the board back")
            assert [e["to_hash"] for e in s.ok("get_relationships", hash=a)] == [b]
        daemon.kill()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_an_edge_to_a_memory_deleted_by_hand_is_ignored_and_cleaned_up(shim, served):
    w = unique()
    a = shim.ok("store_memory", content=f"source {w}", tags=["g"])["hash"]
    b = shim.ok("store_memory", content=f"target {w}", tags=["g"])["hash"]
    shim.ok("create_relationship", from_hash=a, to_hash=b, relation_type="points_to")
    (served.board / "memories" / f"{b}.md").unlink()
    poll(lambda: b not in hits(shim, f"target {w}"), "the deleted file forgotten", PICKUP_BOUND_S)
    assert shim.ok("get_relationships", hash=a) == []
    path = served.board / "memories" / f"{a}.md"
    poll(lambda: b not in path.read_text(), "the dangling edge removed from the source file")


def test_a_memory_file_renamed_by_hand_keeps_its_relations_on_disk_and_in_answers():
    """A file renamed to another ``<hash>.md`` with the same content is the same memory: the edges other
    files hold to it stay live, the prune a listing starts never removes them, and a restart agrees."""
    root = short_tmpdir()
    made: list[InprocessDaemon] = []
    try:
        daemon = InprocessDaemon(root)
        made.append(daemon)
        daemon.start()
        wait_engine_ready(daemon)
        mem = daemon.board / "memories"
        w = unique()
        with InprocessMemShim(daemon).initialize() as s:
            a, b, c = (
                s.ok("store_memory", content=f"{n} {w}", tags=["g"])["hash"]
                for n in ("alpha", "two", "three")  # "one" is a filler word in queries
            )
            s.ok("create_relationship", from_hash=a, to_hash=b, relation_type="needs")  # held by a's file
            s.ok("create_relationship", from_hash=b, to_hash=c, relation_type="then")  # held by b's file
            s.ok("create_relationship", from_hash=c, to_hash=b, relation_type="also")  # held by c's file
            renamed = "f" * 64
            os.rename(mem / f"{b}.md", mem / f"{renamed}.md")
            poll(lambda: renamed in hits(s, f"two {w}"), "the renamed file indexed", PICKUP_BOUND_S)
            assert [(e["from_hash"], e["to_hash"]) for e in s.ok("get_relationships", hash=a)] == [
                (a, renamed)
            ]
            # the listing above used to start a background prune; a store waits behind it on the write lock
            s.ok("store_memory", content=f"four {w}", tags=["g"])
            assert f"target: {b}" in (mem / f"{a}.md").read_text()
            both = s.ok("get_relationships", hash=renamed)
            assert {(e["from_hash"], e["to_hash"], e["relation_type"]) for e in both} == {
                (a, renamed, "needs"),
                (renamed, c, "then"),
                (c, renamed, "also"),
            }
            assert {m["id"] for m in s.ok("recall", query=f"alpha {w}", depth=2, limit=1)["memories"]} == {
                a,
                renamed,
                c,
            }
            assert s.ok("memory_stats")["relationshipCount"] == 3
            # the same edge again is not a second one; the new name deletes an edge stored with the old
            assert (
                s.ok("create_relationship", from_hash=a, to_hash=renamed, relation_type="needs")["isNew"]
                is False
            )
            assert s.ok("delete_relationship", from_hash=c, to_hash=renamed, relation_type="also") == {
                "deleted": True
            }
            assert b not in (mem / f"{c}.md").read_text()
        assert daemon.stop(30) == 0
        daemon = InprocessDaemon(root)
        made.append(daemon)
        daemon.start()
        wait_engine_ready(daemon)
        with InprocessMemShim(daemon).initialize() as s:
            assert [e["to_hash"] for e in s.ok("get_relationships", hash=a)] == [renamed]
            # new content moves the renamed file; the edge held by a follows it
            moved = s.ok("update_memory", hash=renamed, content=f"two, revised {w}")["newHash"]
            assert [e["to_hash"] for e in s.ok("get_relationships", hash=a)] == [moved]
            assert f"target: {moved}" in (mem / f"{a}.md").read_text()
            assert s.ok("delete_relationship", from_hash=a, to_hash=moved, relation_type="needs") == {
                "deleted": True
            }
    finally:
        for d in made:
            d.kill()
        shutil.rmtree(root, ignore_errors=True)


def test_memories_survive_a_restart_and_an_index_rebuild(tmp_path):
    root = short_tmpdir()
    try:
        daemon = InprocessDaemon(root).start()
        wait_engine_ready(daemon)
        w = unique()
        with InprocessMemShim(daemon).initialize() as s:
            a = s.ok("store_memory", content=f"persistent one {w}", tags=["p"])["hash"]
            b = s.ok("store_memory", content=f"persistent two {w}", tags=["p"])["hash"]
            s.ok("create_relationship", from_hash=a, to_hash=b, relation_type="then")
        assert daemon.stop(30) == 0
        shutil.rmtree(root / "index")  # the index is a cache of the board
        daemon = InprocessDaemon(root).start()
        wait_engine_ready(daemon)
        with InprocessMemShim(daemon).initialize() as s:
            assert set(hits(s, w)) == {a, b}
            assert [e["to_hash"] for e in s.ok("get_relationships", hash=a)] == [b]
            assert s.ok("memory_stats")["memoryCount"] == 2
        assert daemon.status()["engine"]["memories"] == 2
        daemon.kill()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_tool_and_hand_written_memories_both_carry_embeddings(models_dir):
    """No path skips the vector half: after a stop, the index rows of a memory stored through the tool and
    of one written by hand both name the embedding model."""
    from memoryd.index.store import IndexStore

    with warm_daemon(models_dir) as daemon:
        w = unique()
        tool_content = f"Stored through the tool: the greenhouse sensors report every minute {w}"
        hand_content = f"Written by hand: the tomato beds are watered at dawn {w}"
        with InprocessMemShim(daemon).initialize() as s:
            tool_hash = s.ok("store_memory", content=tool_content, tags=["garden"])["hash"]
            editor_save(daemon.board / "memories" / f"{sha(hand_content)}.md", hand_file(hand_content))
            poll(lambda: sha(hand_content) in hits(s, w), "the hand-written memory indexed", PICKUP_BOUND_S)
            full = s.full("search_memories", query="Bewässerung der Tomaten im Gewächshaus")
            assert full["mode"] == "hybrid"
        assert daemon.stop(60) == 0
        rows = IndexStore(daemon.root / "index").rows([tool_hash, sha(hand_content)], ("id", "kind", "model"))
    assert set(rows) == {tool_hash, sha(hand_content)}
    for row in rows.values():
        assert row["kind"] == "memory"
        assert row["model"], f"no embedding for {row['id']}"


def test_memories_stored_keyword_only_get_their_vectors_when_the_model_arrives(models_dir):
    """The backfill covers record sources: memories indexed without a model (``--model none``) are
    embedded by the next daemon that has one, without being stored again."""
    root = short_tmpdir()
    made: list[InprocessDaemon] = []
    try:
        first = InprocessDaemon(root)
        made.append(first)
        first.start()
        wait_engine_ready(first)
        w = unique()
        with InprocessMemShim(first).initialize() as s:
            ids = [
                s.ok("store_memory", content=f"memory {i} before the model {w}", tags=["b"])["hash"]
                for i in range(3)
            ]
        assert first.stop(30) == 0
        from memoryd.index.store import IndexStore

        assert all(not r["model"] for r in IndexStore(root / "index").rows(ids, ("id", "model")).values())
        second = InprocessDaemon(root, model="", env={"MEMORYD_MODELS": str(models_dir)})
        made.append(second)
        second.start()
        wait_hybrid(second)
        poll(lambda: '"index_backfilled"' in second.log(), "the backfill pass", timeout=180)
        assert second.stop(60) == 0
        rows = IndexStore(root / "index").rows(ids, ("id", "model"))
        assert set(rows) == set(ids) and all(r["model"] for r in rows.values()), rows
    finally:
        for d in made:
            d.kill()
        shutil.rmtree(root, ignore_errors=True)


def test_planted_links_in_memories_are_refused_and_nothing_is_written_through_them():
    root = short_tmpdir()
    daemon = InprocessDaemon(root)
    try:
        outside = root / "outside"
        outside.mkdir()
        secret = f"Outside the board {unique('sec')}"
        (outside / f"{sha(secret)}.md").write_text(hand_file(secret))
        board = daemon.board
        (board / "memories").mkdir(parents=True)
        (board / "memories" / f"{sha(secret)}.md").symlink_to(outside / f"{sha(secret)}.md")
        hard = f"Hard linked {unique('hl')}"
        (outside / "hard.md").write_text(hand_file(hard))
        os.link(outside / "hard.md", board / "memories" / f"{sha(hard)}.md")
        daemon.start()
        wait_engine_ready(daemon)
        with InprocessMemShim(daemon).initialize() as s:
            assert hits(s, secret.split()[-1]) == [] and hits(s, hard.split()[-1]) == []
            assert s.err("get_memory", hash=sha(secret))["code"] == "E_BROKEN_FILE"
            assert s.err("get_memory", hash=sha(hard))["code"] == "E_BROKEN_FILE"
            assert s.ok("memory_stats")["skippedFiles"] == 2
            # the whole folder swapped for a symlink: refused, nothing written outside
            shutil.rmtree(board / "memories")
            (board / "memories").symlink_to(outside)
            before = sorted(p.name for p in outside.iterdir())
            assert s.err("store_memory", content=f"through a link {unique()}", tags=["x"])["code"] == (
                "E_UNSAFE_PATH"
            )
            assert sorted(p.name for p in outside.iterdir()) == before
            assert s.ok("memory_stats")["memoryCount"] == 0
    finally:
        daemon.kill()
        shutil.rmtree(root, ignore_errors=True)
