"""Secrets found by their shape: private-key blocks, bare AWS secret keys, JWTs, Authorization headers.

Each finder takes a :class:`~memoryd.index.redact_text._Text` and yields ``(start, end, kind)`` spans.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from memoryd.index.redact_text import _LINE_PREFIX, _NEXT_LINE, _TRAILING, Span, _Text, _wordlike
from memoryd.index.redact_vendor import _library

# The BEGIN line, then every following line that looks like key material (base64, a "Header: value" line,
# blank), each after its layout prefix, up to and including the END line; a block cut off before END ends at
# the first line of ordinary text.
_KEY_BEGIN = re.compile(
    r"(?:-{2,}[ \t]*)?BEGIN[ \t]+(?:[A-Z0-9]+[ \t]+)*PRIVATE[ \t]+KEY(?:[ \t]+BLOCK)?(?:[ \t]*-{2,})?"
    r"|PuTTY-User-Key-File-\d+:[^\n]*"
)
_KEY_BODY = re.compile(_LINE_PREFIX + r"(?:[A-Za-z0-9+/=]{1,200}|[A-Za-z][A-Za-z0-9-]*:[^\n]*)?[ \t]*\r?")
_KEY_END = re.compile(
    _LINE_PREFIX + r"-{2,}[ \t]*END[ \t]+[A-Z0-9 \t]*KEY(?:[ \t]+BLOCK)?[ \t]*-{2,}[ \t]*\r?"
)
# The same block on one line: JSON strings with literal "\n" escapes (cloud service-account files) or chat
# text that joined the lines with spaces. Only taken when its END marker is on that line too.
_KEY_INLINE = re.compile(
    r"(?:\\[rn]|[A-Za-z0-9+/= \t])*?-{2,}[ \t]*END[ \t]+[A-Z0-9 \t]*KEY(?:[ \t]+BLOCK)?[ \t]*-{2,}(?:\\[rn])?"
)


def _private_keys(t: _Text) -> Iterator[Span]:
    text = t.text
    if "PRIVATE" not in text and "PuTTY-User-Key-File" not in text:
        return
    for m in _KEY_BEGIN.finditer(text):
        end = m.end()
        inline = _KEY_INLINE.match(text, end) if text[end : end + 1] not in ("\n", "\r") else None
        if inline:
            yield m.start(), inline.end(), "private-key"
            continue
        pos = end + 1 if text.startswith("\r\n", end) else end  # Windows line ends
        while pos < len(text) and text[pos] == "\n":
            line_end = text.find("\n", pos + 1)
            line_end = len(text) if line_end < 0 else line_end
            line = text[pos + 1 : line_end]
            if _KEY_END.fullmatch(line):
                end = line_end
                break
            if not _KEY_BODY.fullmatch(line):
                break
            if line.strip():
                end = line_end
            pos = line_end
        yield m.start(), end, "private-key"


# --- shapes: bare AWS secrets, JWTs, Authorization headers -------------------------------------------

# Exactly 40 base64 characters standing alone (AWS's shape), mixed case with a digit or '/', random-looking.
# Measured: "src/components/ProductCard/ProductCardVi" 3.89, a 40-char CamelCase identifier 4.22, AWS's
# documentation key 4.66, 99% of random 40-char base64 strings above 4.47.
_BARE_40 = re.compile(r"(?<![A-Za-z0-9/+_-])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=_-])")
_BARE_40_ENTROPY = 4.3


def _bare_aws_secrets(t: _Text) -> Iterator[Span]:
    if not any(_BARE_40.search(tok) for tok in t.long_tokens if len(tok) >= 40):
        return
    entropy = _library().b64_entropy
    for m in _BARE_40.finditer(t.text):
        value = m.group()
        mixed = any(c.islower() for c in value) and any(c.isupper() for c in value)
        if (
            mixed
            and any(c.isdigit() or c in "/+" for c in value)
            and not _wordlike(value)
            and entropy(value) >= _BARE_40_ENTROPY
        ):
            yield m.start(), m.end(), "aws-secret-key"


# The plugin's pattern, stretched over the signature (its lazy tail stops before it).
_JWT = re.compile(r"eyJ[A-Za-z0-9_=-]+\.[A-Za-z0-9_=-]+(?:\.[A-Za-z0-9_=+/-]*)*")


def _jwts(t: _Text) -> Iterator[Span]:
    if "eyJ" not in t.text:
        return
    valid = _library().jwt_valid
    for m in _JWT.finditer(t.text):
        token = m.group().rstrip(".")
        header, payload = token.split(".")[:2]
        if valid(f"{header}.{payload}"):
            yield m.start(), m.start() + len(token), "jwt"


_AUTH_HEADER = re.compile(
    rf"(?i:authorization)[\"']?[ \t]*[:=][ \t]*{_NEXT_LINE}[\"']?"
    rf"(?:(?i:bearer|basic|token|digest|negotiate|aws4-hmac-sha256)(?:[ \t]+|[ \t]*\r?\n[ \t]+))?"
    r"(?P<v>[^\s\"'\[][^\s\"']{7,})"
)
_BEARER = re.compile(r"(?i:\bbearer)(?:[ \t]+|[ \t]*\r?\n[ \t]+)(?P<v>[A-Za-z0-9._~+/-]{16,}=*)")


def _auth_headers(t: _Text) -> Iterator[Span]:
    for pattern, trigger in ((_AUTH_HEADER, "authorization"), (_BEARER, "bearer")):
        if trigger in t.low:
            for m in pattern.finditer(t.text):
                value = m.group("v").rstrip(_TRAILING)
                yield m.start("v"), m.start("v") + len(value), "bearer-token"
