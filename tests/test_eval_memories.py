"""``memoryd eval --corpus``: corpus lines become memories, keyword-only here;
the recall bar on the real model is in ``tests/test_eval.py``."""

from __future__ import annotations

import json

from memoryd.cli.eval.labelled import corpus_eval, corpus_memories
from memoryd.index.terms import term_string
from memoryd.kinds.memories.files import content_hash

ROWS = [
    {
        "id": "c1/D1:1",
        "session": "c1/S1",
        "speaker": "Ann",
        "at": "2023-05-08T13:56:00",
        "text": "I adopted a puppy.",
    },
    {
        "id": "c1/D1:2",
        "session": "c1/S1",
        "speaker": "Bob",
        "at": "2023-05-08T13:56:00",
        "text": "What breed is it?",
    },
    {
        "id": "c1/D1:3",
        "session": "c1/S1",
        "speaker": "Ann",
        "at": "2023-05-08T13:56:00",
        "text": "A corgi named Biscuit.",
    },
    {"id": "c1/D2:1", "session": "c1/S2", "speaker": "Bob", "at": "2023-06-01T09:00:00", "text": "Thanks!"},
    {"id": "c2/D1:1", "session": "c2/S1", "speaker": "Bob", "at": "2023-06-01T09:00:00", "text": "Thanks!"},
]


def test_each_line_becomes_a_memory_record_with_its_neighbours():
    built = corpus_memories(ROWS, "prefix")
    records = {ids[0]: rec for rec, ids in built}
    middle = records["c1/D1:2"]
    assert middle.kind == "memory"
    assert middle.id == content_hash("Bob: What breed is it? (8 May 2023)")
    assert middle.project == "c1" and middle.created_at == "2023-05-08T13:56:00Z"
    assert (
        middle.embed_text
        == "Ann: I adopted a puppy.\nBob: What breed is it? (8 May 2023)\nAnn: A corgi named Biscuit."
    )
    assert set(term_string("puppy corgi").split()) <= set(middle.text_aux.split())
    first = records["c1/D1:1"]  # the first of its session: only the turn after it
    assert first.embed_text == "Ann: I adopted a puppy. (8 May 2023)\nBob: What breed is it?"
    lonely = records["c1/D2:1"]  # the only turn of its session
    assert lonely.embed_text == "Bob: Thanks! (1 June 2023)"


def test_lines_with_the_same_content_share_one_memory():
    built = corpus_memories(ROWS, "global")
    shared = [ids for rec, ids in built if rec.id == content_hash("Bob: Thanks! (1 June 2023)")]
    assert shared == [["c1/D2:1", "c2/D1:1"]]
    assert len(built) == 4


def test_corpus_eval_scores_memory_hits_by_their_corpus_ids(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n", encoding="utf-8")
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        json.dumps(
            {"id": "c1/q1", "query": "corgi Biscuit", "relevant": ["c1/D1:3"], "category": "single-hop"}
        )
        + "\n",
        encoding="utf-8",
    )
    report = corpus_eval(corpus, queries, "prefix", None, tmp_path / "cache")
    assert report["record_kind"] == "memory" and report["records"] == 4  # two lines share one memory
    assert report["top1"] == 1.0 and report["by_kind"]["single-hop"]["recall@5"] == 1.0
    old = corpus_eval(corpus, queries, "prefix", None, tmp_path / "cache", records="corpus")
    assert old["record_kind"] == "corpus" and old["top1"] == 1.0
