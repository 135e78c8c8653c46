"""Index records of session files: kinds ``interaction`` and ``summary``.

Both kinds share the records table with briefs and memories and are found by the same hybrid search.
Every stored text is redacted as a whole (``Interaction.redacted`` / ``Summary.redacted``) before it
becomes a record.

Record ids (unique across kinds, and reversible by :func:`parse_record_id`)::

    interaction:<sessionId>:<interaction id>
    summary:<sessionId>

Columns: ``task`` holds the session id (so a session whose several turns match ranks as one piece of
work, like a task's briefs); ``status`` is the one exact-match filter column the hybrid search offers
besides kind and project, so it holds what each kind is filtered by: an interaction's session id
(``query_raw_memories(sessionId=...)``) and a summary's category (``query_summaries(category=...)``);
``project`` is empty.
"""

from __future__ import annotations

from memoryd.index.records import Record, first_line, unplaced
from memoryd.index.terms import term_string
from memoryd.kinds.sessions.files import Interaction, SessionLog, Summary

INTERACTION = "interaction"
SUMMARY = "summary"
KINDS = (INTERACTION, SUMMARY)
#: Characters of each field embedded (e5 reads at most 512 tokens; the start carries the topic).
EMBED_CHARS = 1500


def interaction_record_id(session_id: str, item_id: str) -> str:
    return f"{INTERACTION}:{session_id}:{item_id}"


def summary_record_id(session_id: str) -> str:
    return f"{SUMMARY}:{session_id}"


def parse_record_id(record_id: str) -> tuple[str, str, str | None] | None:
    """``(kind, session_id, item_id | None)`` of a record id made here, or None for any other id."""
    kind, _, rest = record_id.partition(":")
    if kind == INTERACTION:
        session_id, _, item_id = rest.partition(":")
        return (kind, session_id, item_id) if session_id and item_id else None
    if kind == SUMMARY and rest:
        return (kind, rest, None)
    return None


def _record(
    kind: str,
    record_id: str,
    session_id: str,
    status: str,
    created_at: str,
    line: str,
    main: tuple[str, str],
    aux: tuple[str, ...],
    embed: tuple[str, ...],
) -> Record:
    """A record of one session (the module docstring's columns): ``main`` is its heading and body (the title
    is the heading's first line), ``aux`` the auxiliary texts, ``embed`` what is embedded (empty ones left
    out); every text already redacted."""
    return Record(
        id=record_id,
        kind=kind,
        project="",
        task=session_id,
        status=status,
        created_at=created_at,
        title=first_line(main[0]),
        line=line,
        text_main=term_string("\n".join(main)),
        text_aux=term_string("\n".join(aux)),
        embed_text=unplaced("\n".join(x for x in embed if x)),
    )


def interaction_record(item: Interaction) -> Record:
    """The record of one interaction: prompt and response are the main text, the thought is auxiliary."""
    clean = item.redacted()
    prompt, thought, response = clean.prompt, clean.thought, clean.response
    return _record(
        INTERACTION,
        interaction_record_id(item.session_id, item.id),
        item.session_id,
        status=item.session_id,
        created_at=item.timestamp,
        line=first_line(response) or first_line(prompt),
        main=(prompt, response),
        aux=(thought,),
        embed=(prompt[:EMBED_CHARS], response[:EMBED_CHARS]),
    )


def summary_record(summary: Summary) -> Record:
    """The record of a session summary: title and summary are the main text, technologies and category
    auxiliary; its status is the category."""
    clean = summary.redacted()
    title, text = clean.title, clean.summary
    return _record(
        SUMMARY,
        summary_record_id(summary.session_id),
        summary.session_id,
        status=summary.category,
        created_at=summary.timestamp,
        line=first_line(text),
        main=(title, text),
        aux=(" ".join(clean.technologies), summary.category),
        embed=(title, text[:EMBED_CHARS]),
    )


def session_records(log: SessionLog | None, summary: Summary | None) -> list[Record]:
    """Every record of one session: its interactions (file order) and its summary, if any."""
    out = [interaction_record(i) for i in log.interactions] if log is not None else []
    if summary is not None:
        out.append(summary_record(summary))
    return out
