"""Secrets of every kind redaction knows, each laid out the ways people write them in Markdown and text.

A :class:`Secret` is one made-up but well-formed secret: the ``lines`` it is written as (a private-key
block has several; a split assignment has its key on one line and its value on the next) and the
``pieces`` that must never come out (a key block's body lines, a token's random part). Every secret is
generated from a seed, so each place of each case holds a different one and a leak names its place.

:func:`lay_out` writes a secret's lines in one of :data:`LAYOUTS`: plain lines, ``- `` / ``* `` / numbered
bullets (every line its own bullet), a bullet whose continuation lines are indented, a code fence (alone
or inside a bullet), a ``> `` quote, four-space indentation, and Windows line ends.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass

LAYOUTS = (
    "plain",
    "bullets",
    "stars",
    "numbered",
    "continuation",
    "fence",
    "bullet-fence",
    "quote",
    "indented",
    "crlf",
)

# Words each key block's marker lines carry: no answer, export or index byte may hold them (a redaction
# that spans several bullets must not leave its BEGIN or END line in one of them).
MARKERS = ("PRIVATE KEY-----",)


def _stream(seed: str, n: int, alphabet: str) -> str:
    out: list[str] = []
    i = 0
    while len(out) < n:
        for byte in hashlib.sha256(f"{seed}/{i}".encode()).digest():
            if byte < 256 - 256 % len(alphabet):
                out.append(alphabet[byte % len(alphabet)])
        i += 1
    return "".join(out[:n])


ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
B64 = ALNUM + "+/"


def _b64url(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).decode().rstrip("=")


@dataclass(frozen=True)
class Secret:
    kind: str
    lines: tuple[str, ...]
    pieces: tuple[str, ...]
    markers: tuple[str, ...] = ()


def _pem(seed: str, label: str, width: int) -> Secret:
    body = [_stream(f"{seed}{i}", width, B64) for i in range(4)] + [_stream(f"{seed}z", 24, B64) + "=="]
    lines = (f"-----BEGIN {label} PRIVATE KEY-----", *body, f"-----END {label} PRIVATE KEY-----")
    return Secret("private-key", lines, tuple(body), MARKERS)


def _one(kind: str, template: str, value: str, piece: str | None = None) -> Secret:
    return Secret(kind, (template.format(value),), (piece or value,))


def _jwt(seed: str) -> Secret:
    payload = _b64url({"sub": _stream(seed, 12, ALNUM), "iat": 1767225600})
    signature = _stream(seed + "sig", 43, ALNUM)
    token = f"{_b64url({'alg': 'HS256', 'typ': 'JWT'})}.{payload}.{signature}"
    return Secret("jwt", (f"session cookie {token}",), (payload, signature))


# name -> seed -> Secret. The names are the test ids; each makes a secret of one redaction kind.
KINDS: dict[str, Callable[[str], Secret]] = {
    "rsa-key": lambda s: _pem(s, "RSA", 64),
    "openssh-key": lambda s: _pem(s, "OPENSSH", 70),
    "aws": lambda s: Secret(
        "aws",
        (
            f"aws_access_key_id = AKIA{_stream(s, 16, UPPER)}",
            f"aws_secret_access_key = {_stream(s + 'k', 40, B64)}",
        ),
        (f"AKIA{_stream(s, 16, UPPER)}", _stream(s + "k", 40, B64)),
    ),
    "github": lambda s: _one("github-token", "push token: ghp_{}", _stream(s, 36, ALNUM)),
    "slack": lambda s: _one(
        "slack-token",
        "the bot posts with xoxb-{}",
        f"{_stream(s + 'a', 10, '0123456789')}-{_stream(s + 't', 10, '0123456789')}-{_stream(s, 24, ALNUM)}",
    ),
    "stripe": lambda s: _one("api-key", "STRIPE_KEY=sk_live_{}", _stream(s, 24, ALNUM)),
    "anthropic": lambda s: _one("api-key", "use sk-ant-api03-{} for the bot", _stream(s, 40, ALNUM)),
    "openai": lambda s: _one("api-key", "OPENAI_API_KEY=sk-proj-{}", _stream(s, 32, ALNUM)),
    "jwt": _jwt,
    "url": lambda s: _one(
        "url-password", "DATABASE_URL postgres://admin:{}@db.internal:5432/app", _stream(s, 14, ALNUM)
    ),
    "bearer": lambda s: _one("bearer-token", "Authorization: Bearer {}", _stream(s, 32, ALNUM)),
    "password": lambda s: _one("secret-assignment", 'db_password = "{}"', "Q" + _stream(s, 12, ALNUM) + "!9"),
    # split over lines: the key ends its line, the value starts the next one
    "password-split": lambda s: Secret(
        "secret-assignment",
        ("password:", "Q" + _stream(s, 12, ALNUM) + "#7"),
        ("Q" + _stream(s, 12, ALNUM) + "#7",),
    ),
    "token-split": lambda s: Secret(
        "secret-assignment", ("api_token =", _stream(s, 30, ALNUM)), (_stream(s, 30, ALNUM),)
    ),
}


def lay_out(lines: tuple[str, ...], layout: str) -> str:
    """``lines`` written in ``layout`` (see the module docstring); no trailing newline."""
    if layout == "plain":
        return "\n".join(lines)
    if layout == "bullets":
        return "\n".join(f"- {line}" for line in lines)
    if layout == "stars":
        return "\n".join(f"* {line}" for line in lines)
    if layout == "numbered":
        return "\n".join(f"{i}. {line}" for i, line in enumerate(lines, 1))
    if layout == "continuation":
        return "\n".join([f"- {lines[0]}", *(f"  {line}" for line in lines[1:])])
    if layout == "fence":
        return "\n".join(["```", *lines, "```"])
    if layout == "bullet-fence":
        return "\n".join(["- written down as:", "  ```text", *(f"  {line}" for line in lines), "  ```"])
    if layout == "quote":
        return "\n".join(f"> {line}" for line in lines)
    if layout == "indented":
        return "\n".join(f"    {line}" for line in lines)
    if layout == "crlf":
        return "\r\n".join(lines)
    raise ValueError(layout)


def word(seed: str) -> str:
    """A made-up lower-case word (10 letters) that occurs nowhere else: it proves a text was seen."""
    return "zq" + _stream(seed, 8, "abcdefghijklmnopqrstuvwxyz")
