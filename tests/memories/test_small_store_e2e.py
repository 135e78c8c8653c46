"""A new user's store, end to end: a daemon with the real model, served in-process
(:mod:`support.inprocess_daemon`) and spoken to in raw JSON-RPC lines.

The reported cases: with one memory every query returned it (relevance 0.05), nonsense included; with three,
a question about the package manager put a staging-password note (it mentions a password *manager*) above
the note that answers it; one more note, added as a memo, must change none of that.
"""

from __future__ import annotations

import shutil

from support.daemon import short_tmpdir
from support.inprocess_daemon import InprocessDaemon, InprocessMemShim
from support.memories import poll, wait_engine_ready

PNPM = "Use pnpm not npm in the web repo"
STAGING = "The staging DB password is in the team password manager under 'staging-db'"
DEPLOYS = "Deploys to production happen on Tuesdays after the standup"
MEMO = "Remember to renew the TLS certificate for api.example.com in March"
NONSENSE = ["xqzv blorft wibble", "purple elephants dancing", "what's the weather in Paris"]


def test_a_new_users_memories_rank_honestly(models_dir):
    root = short_tmpdir()
    daemon = InprocessDaemon(root, model="", env={"MEMORYD_MODELS": str(models_dir)})
    try:
        daemon.start()
        wait_engine_ready(daemon)
        poll(lambda: daemon.status()["engine"]["search_mode"] == "hybrid", "the model warm", timeout=180)
        with InprocessMemShim(daemon, tools="memories,memo").initialize() as s:

            def contents(query: str) -> list[str]:
                return [m["content"] for m in s.ok("search_memories", query=query)]

            s.ok("store_memory", content=PNPM, tags=["web", "tooling"])
            for query in NONSENSE:
                assert contents(query) == [], query
            assert contents("which package manager does the web repo use") == [PNPM]

            s.ok("store_memory", content=STAGING, tags=["staging", "secrets"])
            s.ok("store_memory", content=DEPLOYS, tags=["deploy"])
            for added in (None, MEMO):
                if added:
                    assert s.call("memo_add", text=added)["result"]["structuredContent"]["saved"]
                assert STAGING not in contents("which package manager for the frontend")
                assert contents("which package manager does the web repo use") == [PNPM]
                assert contents("where is the staging database password") == [STAGING]
                for query in NONSENSE:
                    assert contents(query) == [], query
            assert contents("when does the TLS certificate expire") == [MEMO]  # a memo is a memory
    finally:
        daemon.kill()
        shutil.rmtree(root, ignore_errors=True)
