"""A big tool call whose whole cost is the daemon's check of its arguments (tests of fair serving)."""

from __future__ import annotations

import json


def big_store_line(id: str) -> bytes:
    """A ~10.7 MB ``store_memories`` line: 50 items, each 100,000 characters of content (two UTF-8 bytes
    each) and 2,000 tags, but the last without its tags: the schema check goes through every tag, then
    refuses the call, so nothing is written and the whole call is the daemon's check of the line."""
    tags = [f"tag-{t}" for t in range(2000)]
    items = [{"content": f"memory {i} " + "é" * 99_980, "tags": tags} for i in range(50)]
    del items[-1]["tags"]
    message = {
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {"name": "store_memories", "arguments": {"items": items}},
    }
    return json.dumps(message, ensure_ascii=False).encode()
