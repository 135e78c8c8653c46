"""The access-time writer: a new access is written DELAY_S after it, whatever other memories wait on."""

from __future__ import annotations

import asyncio
import time

from memoryd.kinds.memories import access
from memoryd.kinds.memories.access import AccessTimes


def test_a_new_access_is_not_held_behind_another_memorys_minute(monkeypatch):
    monkeypatch.setattr(access, "DELAY_S", 0.05)
    monkeypatch.setattr(access, "PERSIST_S", 30.0)
    writes: list[tuple[float, dict[str, str]]] = []

    async def write(batch: dict[str, str]) -> None:
        writes.append((time.monotonic(), dict(batch)))

    async def scenario() -> None:
        times = AccessTimes(write)
        times.touch(["a"])
        await asyncio.sleep(0.3)
        assert [set(b) for _, b in writes] == [{"a"}]
        times.touch(["a"])  # written 0.25 s ago: waits PERSIST_S; the writer sleeps on it
        await asyncio.sleep(0.1)
        start = time.monotonic()
        times.touch(["b"])
        deadline = start + 10.0
        while len(writes) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert [set(b) for _, b in writes] == [{"a"}, {"b"}], "b waited behind a's minute"
        await times.close()  # a's pending time is written at shutdown
        assert [set(b) for _, b in writes] == [{"a"}, {"b"}, {"a"}]

    asyncio.run(scenario())


def test_nothing_is_written_twice_within_the_persist_interval(monkeypatch):
    monkeypatch.setattr(access, "DELAY_S", 0.01)
    monkeypatch.setattr(access, "PERSIST_S", 0.4)
    writes: list[dict[str, str]] = []

    async def write(batch: dict[str, str]) -> None:
        writes.append(dict(batch))

    async def scenario() -> None:
        times = AccessTimes(write)
        for _ in range(10):
            times.touch(["a"])
            await asyncio.sleep(0.02)
        assert writes == [{"a": writes[0]["a"]}]
        await asyncio.sleep(0.6)
        assert len(writes) == 2 and writes[1]["a"] >= writes[0]["a"]

    asyncio.run(scenario())
