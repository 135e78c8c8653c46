"""A new user's memories searched by what is typed from a screen or a keyboard in another script, end to end
(a daemon with the real model, served in-process): an error code alone ("E4012", "ERR_SSL_PROTOCOL_ERROR",
"0x80070005") puts the note holding it first, and one CJK character (猫, は) or an emoji (🔥) finds the note
holding exactly that; a single Latin letter finds nothing."""

from __future__ import annotations

from support.inprocess_daemon import InprocessMemShim
from support.memories import warm_daemon

NOTES = [
    "Checkout on the shop says payment failed with E4012 when the saved card has expired",
    "Chrome shows ERR_SSL_PROTOCOL_ERROR on staging until the certificate chain is fixed",
    "The Windows installer stops with 0x80070005 unless it runs as administrator",
    "Error messages on the checkout page should say what to do next",
    "Renew the SSL certificate of the API before the protocol upgrade",
    "うちの猫の名前はミケです",
    "Tag hot fixes with 🔥 in the changelog",
    "Use pnpm not npm in the web repo",
]


def test_codes_characters_and_emoji_typed_alone_find_the_memory_holding_them(models_dir):
    with (
        warm_daemon(models_dir) as daemon,
        InprocessMemShim(daemon, tools="memories").initialize() as s,
    ):
        for text in NOTES:
            s.ok("store_memory", content=text, tags=["notes"])
        for query, note in [
            ("E4012", 0),
            ("ERR_SSL_PROTOCOL_ERROR", 1),
            ("0x80070005", 2),
            ("猫", 5),
            ("は", 5),
            ("🔥", 6),
        ]:
            found = contents(s, query)
            assert found[:1] == [NOTES[note]], (query, found)
        assert contents(s, "a") == []


def contents(s, query: str) -> list[str]:
    """The contents ``search_memories`` answers for ``query``, best first (hybrid mode asserted)."""
    answer = s.full("search_memories", query=query)
    assert answer["mode"] == "hybrid"
    return [m["content"] for m in answer["result"]]
