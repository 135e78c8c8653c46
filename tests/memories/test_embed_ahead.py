"""Embedding ahead (:mod:`memoryd.core.ahead`): a store's passages are embedded while its files are written,
and the writer takes those vectors instead of embedding the passages again (the real model throughout).

What must hold whatever the timing: every passage is embedded exactly once (the writer arriving before
the threads started, while they run, or after they finished), the vectors are the passages' own, the
writer never waits behind a chunk of another write's passages, and a ``store_memories`` call
through the daemon's own session code leaves its memories searchable by meaning.
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from memoryd.core import ahead as ahead_module
from memoryd.core.ahead import Ahead
from support.inprocess_daemon import InprocessDaemon, InprocessMemShim
from support.memories import DISTRACTORS, poll

#: Words the test passages are drawn from: each passage its own mix, so two passages' vectors are far apart.
# fmt: off
WORDS = [
    "deploy", "cache", "token", "billing", "invoice", "worker", "cron", "replica", "payload", "timeout",
    "webhook", "queue", "retry", "kitchen", "garden", "bicycle", "violin", "harbour", "glacier", "lantern",
    "meadow", "orchard", "pottery", "saddle", "telescope", "tunnel", "volcano", "wizard", "yacht", "bakery",
    "canyon", "dolphin", "ember", "falcon", "granite", "hammock", "igloo", "jasmine", "kettle", "lagoon",
    "marble", "nectar", "oyster", "pepper", "quartz", "ribbon", "spruce", "tundra", "umbrella", "velvet",
    "walnut",
]
# fmt: on


def passages(tag: str, n: int) -> list[str]:
    """``n`` distinct passages, as a memory's record embeds them (content, then its tags)."""
    rng = random.Random(tag)
    return [f"{tag} {i}: {' '.join(rng.sample(WORDS, 9))}\nnotes" for i in range(n)]


def same_vectors(got: np.ndarray, want: np.ndarray) -> bool:
    """Row by row the same passages' vectors: the int8 model scales activations per run, so a passage
    embedded in another batch moves by a cosine of ~0.998; another passage's vector is far below."""
    return got.shape == want.shape and bool(np.all(np.sum(got * want, axis=1) > 0.995))


def test_vectors_made_ahead_are_taken_by_the_writer_and_never_embedded_again(embedder):
    texts = passages("alpha", 20)
    want = embedder.embed_passages(texts, count=False)
    ahead = Ahead()
    try:
        before = embedder.passages_embedded
        ahead.request(embedder, texts)
        poll(lambda: ahead.embedded == len(texts), "the passages embedded ahead")
        got = ahead.embed(embedder, texts)
        assert embedder.passages_embedded - before == len(texts)  # once, by the thread
        assert ahead.taken == len(texts)
        assert same_vectors(got, want)
        # taken once: the same passages again are embedded again (a vector is used by one batch)
        again = ahead.embed(embedder, texts)
        assert embedder.passages_embedded - before == 2 * len(texts)
        assert same_vectors(again, want)
    finally:
        ahead.close()


@pytest.mark.parametrize("delay_s", [0.0, 0.01, 0.05])
def test_a_writer_arriving_before_during_or_after_the_thread_embeds_each_passage_once(embedder, delay_s):
    texts = passages(f"beta{delay_s}", 40)
    want = embedder.embed_passages(texts, count=False)
    ahead = Ahead()
    try:
        before = embedder.passages_embedded
        ahead.request(embedder, texts)
        time.sleep(delay_s)
        got = ahead.embed(embedder, texts)
        assert embedder.passages_embedded - before == len(texts)
        assert same_vectors(got, want)
        time.sleep(0.2)  # nothing left for the thread to do: it embeds nothing more
        assert embedder.passages_embedded - before == len(texts)
        assert not ahead.busy
    finally:
        ahead.close()


class Gated:
    """The real embedder, whose embeddings of passages for the chunks wait while :attr:`gate` is closed:
    the test, not the clock, says when a chunk being embedded ends (the writer's, ``first``, never wait).
    ``entered``: set once one such call began."""

    def __init__(self, embedder) -> None:
        self._embedder = embedder
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.calls: list[int] = []  # passages per embedding call
        self.given: list[tuple[list[str], list | None]] = []  # each call's texts and the ids it was given

    def __getattr__(self, name: str):
        return getattr(self._embedder, name)

    def embed_passages(self, texts, **kwargs):
        if not kwargs.get("first"):
            self.entered.set()
            assert self.gate.wait(60), "the test never opened the gate"
        self.calls.append(len(texts))
        self.given.append((list(texts), kwargs.get("ids")))
        return self._embedder.embed_passages(texts, **kwargs)

    def hold(self, ahead: Ahead, texts: list[str]):
        """Request ``texts`` from ``ahead`` and hold the chunk that begins with them open (the model busy
        until the test opens :attr:`gate`); their ticket."""
        self.gate.clear()
        self.entered.clear()
        ticket = ahead.request(self, texts)
        assert self.entered.wait(30), "the chunk never began"
        return ticket

    def fill(self, ahead: Ahead, tag: str) -> list[str]:
        """Hold :data:`DEPTH` chunks of one passage each (every chunk taken); their passages."""
        held = []
        for n in range(ahead_module.DEPTH):
            held += passages(f"{tag}{n}", 1)
            self.hold(ahead, held[-1:])
        assert ahead.full
        return held


def in_thread(ahead: Ahead, texts: list[str], embedder) -> tuple[threading.Thread, dict]:
    """The writer's ``ahead.embed`` on a thread of its own: ``result["value"]`` its vectors,
    ``result["embedded"]`` what the embedding thread had embedded when it returned."""
    result: dict = {}

    def run() -> None:
        result["value"] = ahead.embed(embedder, texts)
        result["embedded"] = ahead.embedded

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def beside_the_held_chunks(ahead: Ahead, texts: list[str], gated: Gated) -> dict:
    """The writer's ``ahead.embed`` of ``texts`` while ``gated`` holds chunks of other passages: checked to
    return without waiting for them; its :func:`in_thread` result."""
    writer, result = in_thread(ahead, texts, gated)
    writer.join(60)
    assert not writer.is_alive(), "the writer waited for chunks of other passages"
    return result


def test_the_writer_waits_for_no_chunk_of_another_write_and_takes_its_own_passages_off_the_requests(
    embedder, monkeypatch
):
    monkeypatch.setattr(ahead_module, "CHUNK", 8)
    gated = Gated(embedder)
    theirs = passages("gamma", 40)  # another write's: five chunks
    mine = passages("delta", 6)
    overlap = theirs[-8:]  # passages of the other write this batch brings too (not started yet)
    ahead = Ahead()
    try:
        before = embedder.passages_embedded
        gated.hold(ahead, theirs)  # the first chunks began and are held
        poll(lambda: ahead.full, "every chunk taken")
        result = beside_the_held_chunks(ahead, mine + overlap, gated)
        # its runs went ahead of the chunks: it returned while they were held
        assert result["embedded"] == 0
        assert same_vectors(result["value"], embedder.embed_passages(mine + overlap, count=False))
        gated.gate.set()
        poll(lambda: not ahead.busy, "the other write's passages embedded")
        # each passage once: the overlap by the writer, the rest of the other write's by the threads
        assert embedder.passages_embedded - before == len(theirs) + len(mine)
        rest = [t for t in theirs if t not in overlap]
        assert ahead.embedded == len(rest)
        assert same_vectors(ahead.embed(gated, rest), embedder.embed_passages(rest, count=False))
        assert embedder.passages_embedded - before == len(theirs) + len(mine)
    finally:
        gated.gate.set()
        ahead.close()


def test_a_writer_with_every_vector_made_waits_for_no_chunk_of_another_write(embedder):
    gated = Gated(embedder)
    mine, theirs = passages("iota", 10), passages("kappa", 10)
    ahead = Ahead()
    try:
        ahead.request(gated, mine)
        poll(lambda: ahead.embedded == len(mine), "the passages embedded ahead")
        gated.hold(ahead, theirs)  # the other write's chunk began and is held
        writer, result = in_thread(ahead, mine, gated)
        writer.join(30)
        assert not writer.is_alive(), "the writer waited for another write's chunk with its vectors made"
        assert same_vectors(result["value"], embedder.embed_passages(mine, count=False))
        assert ahead.taken == len(mine)
    finally:
        gated.gate.set()
        ahead.close()


def test_single_stores_of_many_agents_queued_meanwhile_are_embedded_in_one_run(embedder):
    """While every chunk is taken, each agent's single store queues one passage; the next chunk takes them
    all (up to the chunk's bounds), as the writer batches the stores queued meanwhile."""
    gated = Gated(embedder)
    others = passages("mu", 12)
    ahead = Ahead()
    try:
        first = gated.fill(ahead, "lambda")  # the model busy with the first stores' passages
        for text in others:  # twelve agents' single stores meanwhile
            ahead.request(gated, [text])
        gated.gate.set()
        poll(lambda: ahead.embedded == len(first) + len(others), "every passage embedded ahead")
        assert sorted(gated.calls) == [1] * len(first) + [len(others)]
        assert same_vectors(ahead.embed(gated, others), embedder.embed_passages(others, count=False))
    finally:
        gated.gate.set()
        ahead.close()


def test_batches_queued_meanwhile_are_embedded_whole_and_only_a_batch_past_the_bounds_is_cut(
    embedder, monkeypatch
):
    """Two batches waiting while every chunk is taken are two chunks of their own, not one chunk's worth
    of the first and the second's head (a batch cut in two costs the model more than the same batch
    whole); a batch alone past the chunk's bounds is cut."""
    monkeypatch.setattr(ahead_module, "CHUNK", 12)
    gated = Gated(embedder)
    second, third, big = (passages(tag, n) for tag, n in (("xi", 8), ("omicron", 8), ("pi", 20)))
    ahead = Ahead()
    try:
        first = gated.fill(ahead, "nu")  # the model busy while the batches queue
        ahead.request(gated, second)
        ahead.request(gated, third)
        ahead.request(gated, big)
        gated.gate.set()
        poll(lambda: not ahead.busy, "every passage embedded ahead")
        chunks = sorted(tuple(texts) for texts, _ in gated.given)
        want = sorted([*((t,) for t in first), tuple(second), tuple(third), tuple(big[:12]), tuple(big[12:])])
        assert chunks == want
        both = second + third + big
        assert same_vectors(ahead.embed(gated, both), embedder.embed_passages(both, count=False))
        assert len(gated.given) == len(want)  # none embedded again
    finally:
        gated.gate.set()
        ahead.close()


def test_vectors_of_another_embedder_are_never_used(embedder):
    texts = passages("epsilon", 5)
    ahead = Ahead()
    try:
        ahead.request(embedder, texts)
        poll(lambda: ahead.embedded == len(texts), "the passages embedded ahead")
        ahead._model = object()  # what a model reload leaves behind: vectors kept for another embedder
        before = embedder.passages_embedded
        ahead.embed(embedder, texts)
        assert embedder.passages_embedded - before == len(texts)
        assert ahead.taken == 0
    finally:
        ahead.close()


def test_close_stops_the_threads_and_later_requests_are_ignored(embedder):
    ahead = Ahead()
    ahead.request(embedder, passages("zeta", 3))
    poll(lambda: ahead.embedded == 3, "the passages embedded ahead")
    threads = list(ahead._threads)
    ahead.close()
    assert len(threads) == ahead_module.DEPTH and not any(t.is_alive() for t in threads)
    ahead.request(embedder, passages("eta", 3))
    assert not ahead.busy and ahead._threads == threads


def test_stop_lets_the_chunks_being_embedded_end_and_starts_no_other(embedder):
    gated = Gated(embedder)
    queued = passages("xi", 4)
    ahead = Ahead()
    try:
        first = gated.fill(ahead, "nu")
        ahead.request(gated, queued)
        ahead.stop()  # the daemon stopping: the writer embeds whatever it still needs itself
        gated.gate.set()
        for thread in ahead._threads:
            thread.join(30)
            assert not thread.is_alive()
        assert ahead.embedded == len(first) and gated.calls == [1] * len(first)
    finally:
        gated.gate.set()
        ahead.close()


#: A process whose main thread ends while the thread embeds ahead and nobody closed it (a shutdown
#: past its budget): the interpreter must wait for the chunk, not finalize under onnxruntime (an abort).
EXIT_MID_CHUNK = """
import sys, time
from pathlib import Path
from memoryd.core.ahead import Ahead
from memoryd.index.embed import load_embedder
embedder, status = load_embedder(None, Path(sys.argv[1]))
assert embedder is not None, status
ahead = Ahead()
for n in range(20):  # chunk after chunk: the thread goes in and out of onnxruntime
    ahead.request(embedder, [f"passage {n} {i} " + "about the nightly upload retries " * 30 for i in range(32)])
deadline = time.monotonic() + 30
while not ahead._running and time.monotonic() < deadline:
    time.sleep(0.001)
assert ahead._running, "the chunk never started"
time.sleep(0.5)
print("exiting mid-chunk", flush=True)
"""


def test_the_interpreter_exiting_mid_chunk_waits_for_it_instead_of_aborting(models_dir):
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", EXIT_MID_CHUNK, str(models_dir)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert "exiting mid-chunk" in done.stdout, done.stderr[-2000:]
        assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
        assert "terminate called" not in done.stderr


def test_a_batch_through_the_daemon_is_embedded_once_and_found_by_meaning(tmp_path, models_dir):
    daemon = InprocessDaemon(tmp_path, model="", env={"MEMORYD_MODELS": str(models_dir)}).start(timeout=600)
    try:
        with InprocessMemShim(daemon) as shim:
            shim.initialize()
            poll(lambda: daemon.status()["engine"]["search_mode"] == "hybrid", "the model warm", timeout=600)
            engine = daemon.handle.engine
            before = engine.embedder.passages_embedded
            items = [{"content": t, "tags": ["ops"]} for t in DISTRACTORS]
            items += [{"content": t, "tags": ["ops"]} for t in passages("theta", 24)]
            items.append({"content": "The cat sleeps on the sofa all afternoon", "tags": ["home"]})
            answer = shim.ok("store_memories", items=items)
            assert answer["succeeded"] == len(items)
            found = shim.ok("search_memories", query="my kitten naps on the couch during the day", limit=3)
            assert found[0]["content"] == "The cat sleeps on the sofa all afternoon"
            ahead = engine.indexer.ahead
            assert ahead.requested == len(items)  # the batch handed its passages over
            # each memory's passage embedded once, whoever got there first; nothing made ahead was wasted
            assert engine.embedder.passages_embedded - before == len(items)
            assert ahead.embedded == ahead.taken
            # the same content twice in one batch: the memory, its index record and its vector are the
            # first item's (the second only adds the tags it brings)
            twice = "Release notes are drafted by the on-call engineer before the Thursday cut"
            shim.ok(
                "store_memories",
                items=[
                    {"content": twice, "tags": ["release", "oncall"], "memory_type": "decision"},
                    {"content": twice, "tags": ["release"], "memory_type": "general"},
                ],
            )
            decided = shim.ok("search_memories", query="release notes drafted", memory_type="decision")
            assert [m["content"] for m in decided] == [twice]
            tagged = shim.ok("search_memories", query="release notes drafted", tags=["oncall"])
            assert [m["content"] for m in tagged] == [twice]
            assert ahead.requested == len(items) + 1
            # the same content again later in the batch with a tag of its own: the file gains the tag,
            # and what is embedded (once) is the passage with both tags
            before = engine.embedder.passages_embedded
            merged = "Staging databases are refreshed from production every Sunday night"
            shim.ok(
                "store_memories",
                items=[
                    {"content": merged, "tags": ["staging"]},
                    {"content": merged, "tags": ["database"]},
                ],
            )
            tagged = shim.ok("search_memories", query="staging refreshed", tags=["database"])
            assert [m["content"] for m in tagged] == [merged]
            assert engine.embedder.passages_embedded - before == 1
            assert ahead.embedded == ahead.taken
    finally:
        daemon.kill()


class Failing(Gated):
    """:class:`Gated` whose embeddings raise once :attr:`broken` is set (the model failing mid-stream)."""

    broken = False

    def embed_passages(self, texts, **kwargs):
        if self.broken:
            raise RuntimeError("the model failed")
        return super().embed_passages(texts, **kwargs)


def test_a_ticket_turns_ready_when_its_passages_are_embedded_and_says_so_once(embedder):
    told: list[int] = []
    gated = Failing(embedder)
    ahead = Ahead(lambda: told.append(1))
    first, second = passages("omicron", 6), passages("pi", 6)
    try:
        one = gated.hold(ahead, first)
        two = ahead.request(gated, second)
        assert not one() and not two()  # being embedded, and waiting
        gated.gate.set()
        poll(lambda: two(), "the second write's passages embedded")
        assert one() and told and len(told) <= 2
        # passages already embedded: a ticket that is ready from the start tells nothing
        before = len(told)
        assert ahead.request(gated, first[:2])()
        assert len(told) == before
        assert ahead.request(gated, []) is None
    finally:
        gated.gate.set()
        ahead.close()


def test_a_ticket_whose_passages_the_writer_takes_over_turns_ready_and_a_failed_one_never(embedder):
    told: list[int] = []
    gated = Failing(embedder)
    ahead = Ahead(lambda: told.append(1))
    taken, failed = passages("sigma", 4), passages("tau", 4)
    try:
        gated.fill(ahead, "rho")  # the model busy with other writes' chunks
        ticket = ahead.request(gated, taken)
        writer, result = in_thread(ahead, taken, gated)  # the writer comes for these itself
        writer.join(60)
        assert not writer.is_alive()
        gated.gate.set()
        assert ticket() and told  # nothing of that write waits for the thread any more
        assert same_vectors(result["value"], embedder.embed_passages(taken, count=False))
        gated.broken = True
        lost = ahead.request(gated, failed)
        poll(lambda: not ahead.busy, "the failed chunk over")
        assert not lost()  # a failed head start: the write waits for its own index write, as before
        assert ahead._tickets == []
    finally:
        gated.gate.set()
        ahead.close()


def test_given_token_ids_give_the_same_vectors_as_tokenizing_in_the_call(embedder):
    texts = passages("upsilon", 12)
    want = embedder.embed_passages(texts, count=False)
    ids = embedder.passage_ids(texts)
    assert ids == embedder.passage_ids(list(reversed(texts)))[::-1]  # a text's ids are its own
    assert np.array_equal(embedder.embed_passages(texts, count=False, ids=ids), want)
    some = [row if i % 3 else None for i, row in enumerate(ids)]  # the rest tokenized in the call
    assert np.array_equal(embedder.embed_passages(texts, count=False, ids=some), want)
    with pytest.raises(ValueError, match="ids"):
        embedder.embed_passages(texts, count=False, ids=ids[:-1])


def test_a_request_made_while_every_chunk_is_taken_is_tokenized_beside_them_and_embedded_from_its_ids(
    embedder,
):
    gated = Gated(embedder)
    first, second, third = passages("phi", 6), passages("chi", 6), passages("psi", 6)
    ahead = Ahead()
    try:
        assert not ahead.full
        gated.hold(ahead, first)
        assert not ahead.full  # a request now starts a chunk of its own at once
        other = passages("phi-other", 1)
        gated.hold(ahead, other)
        assert ahead.full
        ahead.request(gated, second)
        ahead.prepare(gated, second + first)  # the chunk being embedded is skipped
        ahead.request(gated, third)  # never prepared: its chunk tokenizes it
        gated.gate.set()
        poll(lambda: not ahead.busy, "the requests embedded")
        calls = {tuple(texts): ids for texts, ids in gated.given}
        assert calls[tuple(first)] is None and calls[tuple(other)] is None
        assert calls[tuple(second + third)][:6] == embedder.passage_ids(second)
        assert calls[tuple(second + third)][6:] == [None] * 6
        assert ahead.prepared == len(second)
        got = ahead.embed(gated, second + third)
        assert np.array_equal(got, embedder.embed_passages(second + third, count=False))
    finally:
        gated.gate.set()
        ahead.close()


def test_the_writer_embedding_passages_itself_takes_their_prepared_ids(embedder):
    gated = Gated(embedder)
    mine = passages("alef", 5)
    ahead = Ahead()
    try:
        gated.fill(ahead, "omega")
        ahead.request(gated, mine)
        ahead.prepare(gated, mine)
        result = beside_the_held_chunks(ahead, mine, gated)  # the writer comes first: no chunk of mine starts
        assert (mine, embedder.passage_ids(mine)) in gated.given
        assert ahead.prepared == len(mine)
        assert np.array_equal(result["value"], embedder.embed_passages(mine, count=False))
    finally:
        gated.gate.set()
        ahead.close()


def test_preparing_with_the_model_idle_or_another_embedder_keeps_nothing(embedder):
    ahead = Ahead()
    try:
        texts = passages("bet", 4)
        ahead.prepare(embedder, texts)  # no chunk ever ran: nothing to run beside
        ahead.request(embedder, texts)
        poll(lambda: not ahead.busy, "the request embedded")
        assert ahead.prepared == 0
        other = Gated(embedder)  # another embedder than the one the chunks ran with
        ahead.prepare(other, passages("gimel", 4))
        assert ahead.prepared == 0 and not ahead._ids
    finally:
        ahead.close()


def test_a_batch_stored_while_another_is_embedded_is_tokenized_beside_it(tmp_path, models_dir):
    daemon = InprocessDaemon(tmp_path, model="", env={"MEMORYD_MODELS": str(models_dir)}).start(timeout=600)
    try:
        with InprocessMemShim(daemon) as one, InprocessMemShim(daemon) as two:
            one.initialize()
            two.initialize()
            poll(lambda: daemon.status()["engine"]["search_mode"] == "hybrid", "the model warm", timeout=600)
            engine = daemon.handle.engine
            before = engine.embedder.passages_embedded
            # long enough that either batch is still being embedded while the other's files are written
            rng = random.Random(5)

            def batch(word: str, meaning: str, distractors: list[str]) -> list[dict]:
                long = [
                    f"{word} {i}: " + " ".join(rng.choices(WORDS, k=80))
                    for i in range(50 - 1 - len(distractors))
                ]
                return [{"content": t, "tags": ["ops"]} for t in [*long, *distractors, meaning]]

            cat = "The cat sleeps on the sofa all afternoon"
            dog = "The dog barks at the postman every morning"
            batches = {
                "one": batch("ledger", cat, DISTRACTORS[:3]),
                "two": batch("journal", dog, DISTRACTORS[3:]),
            }
            answers: dict = {}

            def store(shim, key: str) -> None:
                answers[key] = shim.ok("store_memories", items=batches[key])

            threads = [threading.Thread(target=store, args=(s, k)) for s, k in ((one, "one"), (two, "two"))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            assert [answers[k]["succeeded"] for k in ("one", "two")] == [50, 50]
            ahead = engine.indexer.ahead
            assert ahead.prepared > 0  # the later batch's passages reached the model tokenized
            assert engine.embedder.passages_embedded - before == 100  # each once
            # the vectors are the passages' own, whichever batch was tokenized beside the other
            found = one.ok("search_memories", query="my kitten naps on the couch during the day", limit=3)
            assert found[0]["content"] == cat
            found = two.ok("search_memories", query="our puppy yells at the mail carrier at dawn", limit=3)
            assert found[0]["content"] == dog
    finally:
        daemon.kill()
