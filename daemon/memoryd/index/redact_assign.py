"""Secrets in assignments (``key=value``, ``key: value``, ``"key": "value"``) and passwords stated in prose.

A value is a ``secret-assignment`` when its key names a secret and it is not a reference, a placeholder or
prose; ``high-entropy`` when any key holds a random-looking value; ``stated-password`` when prose says
"the password is X" and X looks like a credential. Findings are ``(start, end, kind)`` spans.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

from memoryd.index.redact_text import _NEXT_LINE, _TRAILING, Span, _Text, _wordlike
from memoryd.index.redact_vendor import _library

# The key may be quoted or bracketed; the value is quoted (up to 1 KB, so an unclosed quote costs bounded
# work) or bare (up to the next space or quote). A bare value never starts with "[", so a placeholder is
# never taken again. Matches consume their value; values holding "=" or ":" are scanned again on their own
# (a URL's ?token=...), which keeps the whole scan linear.
_ASSIGN = re.compile(
    r"(?<![A-Za-z0-9_.])(?P<kq>[\"'`]?)(?P<key>[A-Za-z_][A-Za-z0-9_.-]{0,80})(?P=kq)\]?"
    rf"[ \t]*(?P<op>:=|=>|==|!=|=|:)[ \t]*{_NEXT_LINE}"
    r"(?:\"(?P<dq>[^\"\n]{1,1024})\"|'(?P<sq>[^'\n]{1,1024})'|`(?P<bq>[^`\n]{1,1024})`"
    r"|(?P<bare>[^\s\"'`,;&<>(){}\[\]\\][^\s\"'`,;&]*))"
)
_NESTING = 3  # url=https://host/?next=/x?token=... is three levels deep
_KEY_TRIGGERS = ("pass", "pw", "secret", "token", "key", "credential")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_SECRET_WORDS = _words(
    "password passwd pwd pw pass passphrase passcode secret token apikey credential credentials"
)
_SECRET_SUFFIXES = ("password", "passwd", "secret", "token", "apikey")  # PGPASSWORD, csrftoken
_STRONG_WORDS = _words("password passwd passphrase secret apikey")  # anywhere: secret_key_base
# A key ending in one of these describes a secret instead of holding one: secret_name, token_type, password_file.
_META_WORDS = _words(
    "name names type types id ids file path dir len length count arn ref url uri endpoint manager store version"
    " rotation expiry expires ttl policy field header prefix env var label hint prompt required enabled mode"
)
_KEY_QUALIFIERS = _words(
    "api access secret private auth signing master encryption account client app consumer service"
)
_NOT_SECRET_KEYS = frozenset({"pwd", "oldpwd"})  # the shell's working directory
_ID_KEYS = _words(
    "id ids uuid guid sha sha1 sha256 commit rev revision hash digest checksum etag ref head base parent tree blob"
    " object integrity version"
)
_NOT_SECRET_VALUES = _words(
    "null none nil true false undefined empty redacted required optional string str bool int yes no on off todo"
    " tbd changeme example placeholder"
)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_SECRETISH = re.compile(r"pass|pw|secret|token|key|credential", re.IGNORECASE)
_MASKED = re.compile(r"[*x•.#-]{3,}|\*+[^*]{0,4}|[^*]{0,4}\*{3,}", re.IGNORECASE)
_B64_VALUE = re.compile(r"[A-Za-z0-9+/_=-]{20,}")
_HEX_VALUE = re.compile(r"[0-9a-fA-F]{32,}")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)


def _key_words(key: str) -> list[str]:
    return [w for w in re.split(r"[_.\-]+", _CAMEL.sub("_", key).lower()) if w]


def _is_secret_key(key: str) -> bool:
    words = _key_words(key)
    if not words or key.lower() in _NOT_SECRET_KEYS or words[-1] in _META_WORDS:
        return False
    if (
        words[-1] in _SECRET_WORDS
        or "".join(words).endswith(_SECRET_SUFFIXES)
        or _STRONG_WORDS.intersection(words)
    ):
        return True
    return len(words) >= 2 and words[-1] == "key" and words[-2] in _KEY_QUALIFIERS


def _is_reference(key: str, value: str, bare: bool) -> bool:
    """A value that names or templates a secret instead of being one: $X, ${X}, <X>, self.password, ..."""
    low = value.lower()
    lib = _library()
    return (
        low in _NOT_SECRET_VALUES
        or low.startswith(("$", "%", "{{", "your_", "your-", "<", "[redacted"))
        or "%s" in value
        or "{}" in value
        or _MASKED.fullmatch(value) is not None
        or not any(c.isalnum() for c in value)
        or lib.is_templated(value)
        or (bare and _is_code_reference(value))
    )


def _is_code_reference(value: str) -> bool:
    """A bare value that is code, not a literal: a call or index (``getpass()``, ``sys.argv[2]``), a dotted
    name of words (``self.password``, ``settings.SECRET``) or a variable named like a secret (``password``,
    ``api_key``, ``accessToken``; but ``mypassword123`` is a literal)."""
    if "(" in value or "[" in value:
        return True
    if not _IDENTIFIER.fullmatch(value):
        return False
    if "." in value:
        return _wordlike(value)
    named_like_secret = _SECRETISH.search(value) is not None and _wordlike(value)
    return named_like_secret and (
        "_" in value or _CAMEL.search(value) is not None or value.lower() in _SECRET_WORDS
    )


def _credential_like(value: str) -> bool:
    """For ``Word: value`` in prose: a digit among letters, or a symbol beyond path/word punctuation."""
    has_digit = any(c.isdigit() for c in value)
    return (has_digit and any(c.isalpha() for c in value)) or any(
        not c.isalnum() and c not in "/-._" for c in value
    )


def _entropy_limit(length: int) -> float:
    # 0.84 * log2(n) is the 1st percentile of random base64 strings of length n (measured, n = 16..40);
    # detect-secrets' fixed 4.5 is out of reach for strings shorter than ~40.
    return min(4.5, 0.84 * math.log2(length))


def _is_high_entropy(key: str, value: str, line: str) -> bool:
    lib = _library()
    words = _key_words(key)
    if words and words[-1] in _ID_KEYS:
        return False
    if _UUID.search(value) or lib.is_id_string(value, line) or lib.is_sequential(value):
        return False
    if _HEX_VALUE.fullmatch(value):
        return lib.hex_entropy(value) > 3.0  # detect-secrets' hex limit
    if _B64_VALUE.fullmatch(value) and not _wordlike(value):
        classes = sum(
            (
                any(c.islower() for c in value),
                any(c.isupper() for c in value),
                any(c.isdigit() for c in value),
            )
        )
        return classes >= 2 and lib.b64_entropy(value) >= _entropy_limit(len(value))
    return False


def _candidate_lines(t: _Text) -> list[tuple[int, int]]:
    """Lines that can hold a secret assignment: a secret-ish key word, or a long base64/hex token."""
    low = t.low
    starts: set[int] = set()
    for word in _KEY_TRIGGERS:
        pos = low.find(word)
        while pos >= 0:
            near = low[pos : pos + 48]  # a key word with no operator after it is prose ("the keys are ...")
            if "=" in near or ":" in near:
                starts.add(pos)
            pos = low.find(word, pos + len(word))
    pos = 0
    for tok in t.long_tokens:
        pos = t.text.find(tok, pos)
        if _random_run(tok):
            starts.add(pos)
        pos += len(tok)
    lines: list[tuple[int, int]] = []
    for p in sorted(starts):  # in order, so each line is bounded once: linear even for one huge line
        if not lines or p > lines[-1][1]:
            lines.append(_with_next_line(t, *t.line_bounds(p)))
    return lines


def _with_next_line(t: _Text, start: int, end: int) -> tuple[int, int]:
    """A line that ends with an operator (``password:``, ``token =``) and the next line, which holds its value."""
    text, last = t.text, end
    while last > start and text[last - 1] in " \t\r":
        last -= 1
    if last > start and text[last - 1] in ":=>" and end < len(text):
        return start, t.line_bounds(end + 1)[1]
    return start, end


def _random_run(tok: str) -> bool:
    """Does ``tok`` hold a base64/hex run that is not made of words (the only kind high-entropy can flag)?"""
    return any(not _wordlike(run) for run in _B64_VALUE.findall(tok))


def _assignments(t: _Text) -> Iterator[Span]:
    for line_start, line_end in _candidate_lines(t):
        yield from _assignments_in(t, line_start, line_end, 0)


def _assignments_in(t: _Text, line_start: int, line_end: int, depth: int) -> Iterator[Span]:
    text = t.text
    pos = line_start
    while (m := _ASSIGN.search(text, pos, line_end)) is not None:
        pos = m.end()
        group = next(g for g in ("dq", "sq", "bq", "bare") if m.group(g) is not None)
        start, end = m.span(group)
        value = m.group(group)
        if group == "bare":
            value = value.rstrip(_TRAILING)
            end = start + len(value)
        kind = (
            _judge(t, m, group, value, end, line_start, line_end)
            if m.group("op") not in ("==", "!=")
            else None
        )
        if kind:
            yield start, end, kind
        elif depth < _NESTING and ("=" in value or ":" in value):
            yield from _assignments_in(t, start, end, depth + 1)
        elif "\n" in text[m.end("op") : start]:
            # The next line was not this key's value ("credentials:\n  password: x" is a nested mapping):
            # scan that line on its own.
            pos = start


def _judge(
    t: _Text, m: re.Match[str], group: str, value: str, end: int, line_start: int, line_end: int
) -> str | None:
    """The kind of secret an assignment's value is, or None. (A comparison, ``==``/``!=``, never gets here.)"""
    if len(value) < 4:
        return None
    key = m.group("key")
    if _is_secret_key(key):
        if _is_reference(key, value, group == "bare") or _library().is_sequential(value):
            return None
        # "Password: reset it", go test's "--- PASS: TestX/y", a docstring's ":param api_key: Your key": prose.
        # "password: hunter2" and "db_password: swordfish" at the end of a line are not.
        prose = key.isalpha() or len(t.text[end : min(line_end, end + 200)].split()) >= 2
        if group == "bare" and m.group("op") == ":" and not _credential_like(value) and prose:
            return None
        return "secret-assignment"
    # Context for the id heuristic: the key and what precedes it on the line, bounded so that a megabyte-long
    # line costs linear time, not a copy per match.
    if _is_high_entropy(key, value, t.text[max(line_start, m.start() - 200) : end]):
        return "high-entropy"
    return None


# --- a password stated in prose: "the db password is 0jPZ4Rez..." -------------------------------------

# The password word, up to three words naming what it opens ("for the staging db"), a verb, the value. The
# value is judged by _stated_password: most sentences go on with an ordinary word ("is required", "is
# stored in 1Password"), and "1Password" itself never starts a match (no word boundary after the digit).
_STATED = re.compile(
    r"(?i:\b(?:pass(?:word|wd|phrase|code)|pwd)s?\b)"
    r"(?:[ \t]+(?i:for|of|on|to|at|in)(?:[ \t]+[\w.@:/-]{1,40}){1,3}?)?"
    r"[ \t]+(?i:is|was|is now|was changed to|changed to|is set to|set to|reads|=)[ \t]*:?[ \t]+"
    r"[\"'`]?(?P<v>[^\s\"'`]{6,200})"
)
# A JSON-encoded text ends a sentence with a literal backslash-n: the value stops at such an escape.
_ESCAPE = re.compile(r"\\[nrt\"'\\]")


def _stated_password(value: str) -> bool:
    """A credential rather than a word: a digit or symbol among letters, not made of words (``sha256``,
    ``v2-api``), not a URL, a path of words or a reference (``$DB_PASS``, ``<secret>``)."""
    return (
        len(value) >= 6
        and "://" not in value
        and _credential_like(value)
        and not _wordlike(value)
        and not _is_reference("password", value, True)
        and not _library().is_sequential(value)
    )


def _stated_passwords(t: _Text) -> Iterator[Span]:
    if "pass" not in t.low and "pwd" not in t.low:
        return
    for m in _STATED.finditer(t.text):
        value = _ESCAPE.split(m.group("v"), 1)[0].rstrip(_TRAILING)
        if _stated_password(value):
            yield m.start("v"), m.start("v") + len(value), "stated-password"
