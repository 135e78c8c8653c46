"""HTML pieces: escaping, the page shell, delete forms. Every text from the board passes :func:`esc`.

No inline script or style anywhere (attributes included): the page's Content-Security-Policy allows only
``/static/`` files, so the shell links ``app.css`` and ``app.js`` and the markup carries classes and
``data-*`` attributes only.
"""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape
from urllib.parse import quote

#: The navigation: (path, label).
NAV = (("/", "Tasks"), ("/search", "Search"), ("/memories", "Memories"), ("/sessions", "Sessions"))
#: The header that asks for the contents of ``<main>`` only (the live refresh).
PARTIAL_HEADER = "x-memoryd-partial"


def esc(text: object) -> str:
    """Text as HTML (quotes included, so it is safe in attribute values too)."""
    return escape("" if text is None else str(text), quote=True)


def url(*parts: str) -> str:
    """A path from segments, each percent-encoded: ``url("task", id)`` -> ``/task/<id>``."""
    return "/" + "/".join(quote(p, safe="") for p in parts)


def age(iso: str, now: datetime | None = None) -> str:
    """``"3 days ago"`` for an ISO-8601 time (``""`` when unparsable)."""
    try:
        then = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return ""
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    seconds = ((now or datetime.now(UTC)) - then).total_seconds()
    for size, unit in ((86400 * 365, "year"), (86400 * 30, "month"), (86400, "day"), (3600, "hour")):
        if seconds >= size:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n > 1 else ''} ago"
    return "just now" if seconds >= 0 else ""


def delete_form(action: str, csrf: str, what: str, back: str) -> str:
    """A POST form with one button; ``what`` names the item for the button's label and the confirmation."""
    return (
        f'<form class="del" method="post" action="{esc(action)}" data-confirm="Delete {esc(what)}?">'
        f'<input type="hidden" name="csrf" value="{esc(csrf)}">'
        f'<input type="hidden" name="back" value="{esc(back)}">'
        f'<button type="submit" aria-label="Delete {esc(what)}">Delete</button></form>'
    )


def status_badge(status: str) -> str:
    return f'<span class="badge {esc(status)}">{esc(status)}</span>'


def page(title: str, main: str, *, active: str = "", query: str = "") -> str:
    """The whole document around ``main`` (the part the live refresh replaces)."""
    links = "".join(
        f'<a href="{path}"{" aria-current=page" if path == active else ""}>{label}</a>' for path, label in NAV
    )
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>{esc(title)} · memoryd</title>
<link rel="stylesheet" href="/static/app.css">
<script src="/static/app.js" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header>
<nav aria-label="Sections"><strong class="brand">memoryd</strong>{links}</nav>
<form class="search" role="search" method="get" action="/search">
<label for="q" class="vh">Search briefs and memories</label>
<input id="q" name="q" type="search" value="{esc(query)}" placeholder="Search like an agent does" autocomplete="off">
<button type="submit">Search</button>
</form>
<span id="live" class="live" role="status" aria-live="polite">connecting…</span>
</header>
<main id="main" tabindex="-1">
{main}
</main>
</body>
</html>
"""
