"""The index record of a memory (kind ``"memory"``), derived from its board file.

One record per memory file, id = the file's hash (:attr:`memoryd.kinds.memories.files.Memory.id`), so a
search hit names the memory directly. Columns: ``project`` (filterable), ``status`` = ``memory_type``
(so search can filter by type), ``created_at``, ``line`` = the first line of the content. Keyword
terms: content and tags in ``text_main``, the project in ``text_aux``. The embedded text is the
content plus its tags (tags are what an agent files a memory under). Every stored text is
redacted as a whole first (:meth:`memoryd.kinds.memories.files.Memory.redacted`), so no secret reaches the
keyword index or a vector. Importance and ``accessed_at`` are not part of the record: they change often and only re-rank
(:mod:`memoryd.kinds.memories.ranking`), so a search that touches ``accessed_at`` rewrites nothing here.
"""

from __future__ import annotations

from memoryd.index.derive_cache import source_hash
from memoryd.index.records import Record, first_line, unplaced
from memoryd.index.terms import term_string
from memoryd.kinds.memories.files import Memory

KIND = "memory"


def memory_inputs(memory: Memory) -> str:
    """The hash of what :func:`memory_record` reads (importance, ``accessed_at`` and relations are not)."""
    m = memory
    return source_hash(m.id, m.content, m.tags, m.memory_type, m.created_at, m.project)


def memory_record(memory: Memory) -> Record:
    """The record of ``memory`` (see the module docstring)."""
    m = memory.redacted()
    tags = " ".join(m.tags)
    embed = m.content + (f"\n{tags}" if tags else "")
    return Record(
        id=memory.id,
        kind=KIND,
        project=m.project,
        task="",
        status=memory.memory_type,
        created_at=m.created_at,
        title="",
        line=first_line(m.content),
        text_main=term_string(f"{m.content}\n{tags}"),
        text_aux=term_string(m.project),
        embed_text=unplaced(embed),
    )
