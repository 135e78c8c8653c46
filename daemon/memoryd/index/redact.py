"""Secret redaction: run on every text before it is indexed and again on every answer.

One module of ~700 lines on purpose: the rules, their order and the false-positive filters are judged
together (a rule moved elsewhere changes what the others see), and each is short.

``redact(text)`` replaces each secret with a typed placeholder ``[REDACTED:<kind>]`` and counts them. It is
idempotent (a placeholder is never matched again) and linear in the text size: about 0.3-1 ms per 10 KB of
ordinary text (docs/board.md has the figures), because every rule first checks a cheap trigger (a substring,
or the few whitespace-separated tokens of 20+ characters) before it runs its regex over the whole text.

Where the rules come from (docs/board.md, "Redaction", has the caught / not-caught table):

* Yelp **detect-secrets 1.5.0** supplies the token formats and its false-positive heuristics: the compiled
  ``denylist`` patterns of its AWS, GitHub, GitLab, Slack, Stripe, OpenAI, SendGrid, PyPI, Square, Discord,
  Telegram, Twilio, Mailchimp, Azure-storage and basic-auth plugins, the JWT formal-validity check, the
  Shannon-entropy function and the ``is_templated_secret`` / ``is_sequential_string`` /
  ``is_likely_id_string`` filters (its line-level ``is_indirect_reference`` hides real secrets that share a
  line with a call, so a value-level check of ours replaces it). Its patterns run with ``finditer`` to get
  spans: a plugin's ``analyze_line`` returns values only, reads global settings and may try network
  verification, so it is never called.
* Small rules of our own fill its gaps: multi-line private-key blocks (the plugin flags only the BEGIN line),
  AWS secret keys without an ``aws`` keyword or quotes, ``github_pat_`` and Google API keys, JWT signatures
  (the plugin's lazy pattern stops before them), ``Authorization``/``Bearer`` credentials, assignments whose
  key names a secret (the plugin's keyword rule runs to the end of the line and has no ``token``), and
  high-entropy values in any assignment (the plugin insists on quotes and a length-blind limit), prefixed
  vendor tokens it does not know (Stripe test keys and webhook secrets, npm, Hugging Face, DigitalOcean, ...:
  the shapes public scanners such as gitleaks document), and a password stated in prose ("the password is
  ...") when the word after it looks like a credential.
* A fixed-shape match is widened to its whole token (letters, digits, ``_``, ``-`` on both sides): a
  plugin's pattern stops at the length the vendor used when it was written (Stripe's 24 characters), and a
  longer key must not leave its tail in clear text.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache

PLACEHOLDER = "[REDACTED:{kind}]"
#: Finds the placeholders :func:`redact` writes (a kind is letters, digits, ``_`` and ``-``).
PLACEHOLDERS = re.compile(r"\[REDACTED:[A-Za-z0-9_-]*\]")

# kind -> what it catches (docs/board.md renders this). Order = priority when two findings overlap.
KINDS: dict[str, str] = {
    "private-key": "PEM/OpenSSH/PGP/PKCS#8 private-key blocks, BEGIN line through END line (also on one line with"
    ' literal "\\n" escapes, or cut off before END), and PuTTY key files',
    "aws-access-key-id": "AWS access key ids AKIA/ASIA/ABIA/ACCA/A3T... (detect-secrets AWSKeyDetector)",
    "aws-secret-key": "AWS secret access keys: 40 base64 characters standing alone, mixed case with a digit or"
    " '/', random-looking (Shannon entropy >= 4.3); or quoted after an aws...key keyword (detect-secrets)",
    "github-token": "GitHub ghp_/gho_/ghu_/ghs_/ghr_ tokens (detect-secrets) and github_pat_ fine-grained tokens",
    "gitlab-token": "GitLab glpat-/gldt-/glft-/glsoat-/glrt-/glcbt-/glimt-/glptt-/glagent-/gloas- and runner"
    " registration tokens (detect-secrets; longer and routable ones by an own rule)",
    "slack-token": "Slack xoxa-/xoxb-/xoxp-/xoxo-/xoxs-/xoxr- tokens (detect-secrets)",
    "slack-webhook": "Slack webhook URLs hooks.slack.com/services/T.../B.../... (detect-secrets)",
    "api-key": "fixed-shape vendor keys (detect-secrets): Stripe sk_live_/rk_live_, OpenAI sk-...T3BlbkFJ...,"
    " SendGrid SG., PyPI pypi-AgE..., Square sq0csp-, Discord and Telegram bot tokens, Twilio AC/SK, Mailchimp"
    " ...-usN, Azure storage AccountKey=; and (own rules) Google AIza..., Anthropic sk-ant-, OpenAI sk-proj-/"
    "sk-svcacct-/sk-admin-, Stripe sk_test_/rk_test_/whsec_, npm npm_, Hugging Face hf_/api_org_, DigitalOcean"
    " dop_v1_/doo_v1_/dor_v1_, Databricks dapi, Shopify shpat_/shpca_/shppa_/shpss_, Linear lin_api_,"
    " Supabase sbp_/sb_secret_, Fly.io fo1_/fm1_/fm2_, Doppler dp.pt./dp.st./dp.ct./dp.sa., Postman"
    " PMAK-, Pulumi pul-, Grafana glsa_/glc_, Sentry sntrys_/sntryu_, Docker dckr_pat_, PlanetScale pscale_,"
    " Groq gsk_, Perplexity pplx-, Replicate r8_, Notion ntn_, Heroku HRKU-, Tailscale tskey-, age"
    " AGE-SECRET-KEY-1; each match widened to its whole token",
    "jwt": "JSON Web Tokens eyJ....eyJ....signature whose header and payload decode to JSON (detect-secrets check)",
    "bearer-token": "the credential after 'Authorization:' / 'Proxy-Authorization:' (8+ chars) and after 'Bearer '"
    " (16+ chars)",
    "url-password": "the password in scheme://user:password@host (detect-secrets BasicAuthDetector)",
    "secret-assignment": "the value assigned to a key naming a secret - password, passwd, pwd, pw, pass, passphrase,"
    " passcode, secret, token, api_key/apikey, credential(s), <api|access|secret|private|auth|signing|client|...>"
    "_key - in key=value, key: value, key := value, key => value, 'key': 'value', export KEY=value; the key is kept",
    "stated-password": "the word after 'password/passphrase/passcode is/was/...' in prose when it looks like a"
    " credential (a digit or symbol among letters, not a plain word, a path or a reference)",
    "high-entropy": "random-looking values of any assignment: 20+ base64 characters above a length-aware entropy"
    " limit, or 32+ hex characters (not under id/sha/commit/hash/digest/... keys, not UUIDs)",
}


@dataclass(frozen=True)
class Redacted:
    """Result of :func:`redact`: the redacted text and how many secrets of each kind were replaced.

    ``fresh``: for each placeholder of ``text``, in order, whether this call wrote it (``False``: it was in
    the text given, e.g. copied from an earlier answer); ``None`` when the text given held none."""

    text: str
    counts: dict[str, int] = field(default_factory=dict)
    fresh: tuple[bool, ...] | None = field(default=None, compare=False)  # about the input, not the result

    @property
    def total(self) -> int:
        return sum(self.counts.values())


Span = tuple[int, int, str]  # start, end, kind
_LONG = 20  # a token of at least this many non-space characters can hold any fixed-shape secret we look for
# an ISO-8601 time ("2026-12-03T07:00:00Z", 20 characters) is long but holds no secret: without this every
# stored time went through every rule, ~0.1 ms each, twice per memory indexed
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?", re.ASCII)


class _Text:
    """The text plus the cheap views the rules' triggers look at."""

    def __init__(self, text: str) -> None:
        self.text = text
        # ASCII-only lower case with one character per character, so offsets stay valid ("İ".lower() is 2).
        self.low = text.encode("ascii", "replace").decode("ascii").lower()
        self.long_tokens = [tok for tok in text.split() if len(tok) >= _LONG and not _TIME.fullmatch(tok)]
        self._reduced: str | None = None

    @property
    def reduced(self) -> str:
        """The long tokens alone: a fixed-shape secret matches here whenever it matches the text."""
        if self._reduced is None:
            self._reduced = "\n".join(self.long_tokens)
        return self._reduced

    def line_bounds(self, pos: int) -> tuple[int, int]:
        start = self.text.rfind("\n", 0, pos) + 1
        end = self.text.find("\n", pos)
        return start, len(self.text) if end < 0 else end


# --- rules built on detect-secrets -------------------------------------------------------------------


@dataclass(frozen=True)
class _PatternRule:
    kind: str
    pattern: re.Pattern[str]
    group: int = 0  # 0: the whole match is the secret; n: only group n is
    # lower-case substrings, one of which must occur; () = the pattern must first match a long token
    triggers: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Library:
    triggered: tuple[_PatternRule, ...]
    untriggered: tuple[_PatternRule, ...]
    b64_entropy: Callable[[str], float]
    hex_entropy: Callable[[str], float]
    is_templated: Callable[[str], bool]
    is_sequential: Callable[[str], bool]
    is_id_string: Callable[[str, str], bool]
    jwt_valid: Callable[[str], bool]


@cache
def _library() -> _Library:
    """Import detect-secrets once (about 0.3 s, mostly ``requests``) and collect what we use from it."""
    from detect_secrets.filters import heuristic
    from detect_secrets.plugins.aws import AWSKeyDetector
    from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
    from detect_secrets.plugins.basic_auth import BasicAuthDetector
    from detect_secrets.plugins.discord import DiscordBotTokenDetector
    from detect_secrets.plugins.github_token import GitHubTokenDetector
    from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString, HexHighEntropyString
    from detect_secrets.plugins.jwt import JwtTokenDetector
    from detect_secrets.plugins.mailchimp import MailchimpDetector
    from detect_secrets.plugins.openai import OpenAIDetector
    from detect_secrets.plugins.pypi_token import PypiTokenDetector
    from detect_secrets.plugins.sendgrid import SendGridDetector
    from detect_secrets.plugins.slack import SlackDetector
    from detect_secrets.plugins.square_oauth import SquareOAuthDetector
    from detect_secrets.plugins.stripe import StripeDetector
    from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
    from detect_secrets.plugins.twilio import TwilioKeyDetector

    aws_id, aws_secret = AWSKeyDetector.denylist
    slack_token, slack_hook = SlackDetector.denylist
    api_keys = (
        StripeDetector, OpenAIDetector, SendGridDetector, PypiTokenDetector, SquareOAuthDetector,
        AzureStorageKeyDetector, _GOOGLE_API_KEY, _ANTHROPIC_KEY, _OPENAI_SCOPED_KEY, DiscordBotTokenDetector,
        TelegramBotTokenDetector, TwilioKeyDetector, MailchimpDetector, _PREFIXED_TOKEN,
    )  # fmt: skip
    # (plugin or pattern, kind, lower-case substrings one of which must occur). With no substrings the rule
    # runs on the text only if it matches one of the long tokens first: every one of these secrets is a
    # token of 20+ characters, and the few long tokens of a text are searched far faster than the text.
    table: list[tuple[object, str, tuple[str, ...]]] = [
        (aws_id, "aws-access-key-id", ()),
        (GitHubTokenDetector, "github-token", ()),
        (_GITHUB_PAT, "github-token", ()),
        (GitLabTokenDetector, "gitlab-token", ()),
        (_GITLAB_LONG, "gitlab-token", ()),
        (slack_token, "slack-token", ("xox",)),  # case-insensitive patterns are slow to run blind
        (slack_hook, "slack-webhook", ("hooks.slack.com",)),
        *((source, "api-key", ()) for source in api_keys),
    ]
    rules = [
        _PatternRule(kind, pattern, triggers=triggers)
        for source, kind, triggers in table
        for pattern in (source if isinstance(source, re.Pattern) else None, *getattr(source, "denylist", ()))
        if pattern is not None
    ]
    rules.append(_PatternRule("aws-secret-key", aws_secret, group=1, triggers=("aws",)))
    rules.append(_PatternRule("url-password", BasicAuthDetector.denylist[0], group=1, triggers=("://",)))
    b64, hexa = Base64HighEntropyString(), HexHighEntropyString()
    return _Library(
        triggered=tuple(r for r in rules if r.triggers),
        untriggered=tuple(r for r in rules if not r.triggers),
        b64_entropy=b64.calculate_shannon_entropy,
        hex_entropy=hexa.calculate_shannon_entropy,
        is_templated=heuristic.is_templated_secret,
        is_sequential=heuristic.is_sequential_string,
        is_id_string=heuristic.is_likely_id_string,
        jwt_valid=JwtTokenDetector.is_formally_valid,
    )


def warm() -> None:
    """Load detect-secrets now, so the first :func:`redact` does not pay the ~0.3 s import."""
    _library()


_GITHUB_PAT = re.compile(r"github_pat_[A-Za-z0-9_]{22,255}")
# GitLab tokens longer than the plugin's 50 characters (its pattern then matches nothing at all), and the
# routable shape with its ".xx" + checksum tail.
_GITLAB_LONG = re.compile(
    r"(?<![A-Za-z0-9])gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-[A-Za-z0-9_-]{51,}"
    r"|(?<![A-Za-z0-9])gl(?:pat|rt)-[A-Za-z0-9_-]{20,300}\.[0-9a-z]{9}(?![A-Za-z0-9_-])"
)
_GOOGLE_API_KEY = re.compile(r"AIza[0-9A-Za-z_-]{35,}")
# Anthropic keys and OpenAI's project/service-account keys: detect-secrets' OpenAI plugin knows only the
# older "sk-...T3BlbkFJ..." shape.
_ANTHROPIC_KEY = re.compile(r"sk-ant-[A-Za-z0-9_-]{20,}")
_OPENAI_SCOPED_KEY = re.compile(r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}")
# Vendor tokens that announce themselves by a prefix (the shapes public scanners such as gitleaks and
# trufflehog document), as one alternation so the long tokens are scanned once. Each body is long enough
# that a prefix followed by an ordinary identifier ("npm_install_script") does not match; the span is then
# widened to the whole token by _whole_token. Publishable keys (Stripe pk_, Supabase sb_publishable_) are
# public by design and stay.
_PREFIXED_TOKEN = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"[sr]k_(?:live|test)_[0-9A-Za-z]{20,}"  # Stripe secret and restricted keys, live and test
    r"|whsec_[0-9A-Za-z+/=]{24,}"  # Stripe webhook signing secrets
    r"|npm_[A-Za-z0-9]{36}"
    r"|hf_[A-Za-z0-9]{30,}|api_org_[A-Za-z0-9]{30,}"  # Hugging Face user and organisation tokens
    r"|do[por]_v1_[a-f0-9]{64}"  # DigitalOcean personal, OAuth and refresh tokens
    r"|dapi[a-f0-9]{32}(?:-\d)?"  # Databricks
    r"|shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"  # Shopify
    r"|lin_(?:api|oauth)_[A-Za-z0-9]{40}"  # Linear
    r"|sbp_[a-f0-9]{40}|sb_secret_[A-Za-z0-9_-]{20,}"  # Supabase
    r"|fo1_[A-Za-z0-9_-]{39,}|fm[12][ar]?_[A-Za-z0-9+/=_-]{40,}"  # Fly.io
    r"|dp\.(?:pt|st|ct|sa|scim|audit)\.[A-Za-z0-9]{40,}"  # Doppler
    r"|PMAK-[a-f0-9]{24}-[a-f0-9]{34}"  # Postman
    r"|pul-[a-f0-9]{40}"  # Pulumi
    r"|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|glc_[A-Za-z0-9+/]{32,}={0,3}"  # Grafana
    r"|sntr[ysu]_[A-Za-z0-9+/=_-]{40,}"  # Sentry
    r"|dckr_pat_[A-Za-z0-9_-]{27,}"  # Docker Hub
    r"|pscale_(?:tkn|oauth|pw)_[A-Za-z0-9_.=-]{32,}"  # PlanetScale
    r"|gsk_[A-Za-z0-9]{48,}|pplx-[A-Za-z0-9]{48}|r8_[A-Za-z0-9]{37}"  # Groq, Perplexity, Replicate
    r"|ntn_[0-9]{11}[A-Za-z0-9]{35}"  # Notion
    r"|HRKU-[A-Za-z0-9_-]{60}"  # Heroku
    r"|tskey-[a-z]+-[A-Za-z0-9]{8,}-[A-Za-z0-9]{16,}"  # Tailscale
    r"|AGE-SECRET-KEY-1[02-9AC-HJ-NP-Z]{58}"  # age
    r")"
)
# What a fixed-shape token is made of: a match is widened over these on both sides, so a key longer than
# its rule's fixed length (Stripe's keys grew from 32 to over 100 characters) is never cut in two.
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _whole_token(text: str, start: int, end: int, floor: int) -> tuple[int, int]:
    """``(start, end)`` widened over :data:`_TOKEN_CHARS` on both sides, never back past ``floor`` (the end
    of the previous widened span, which keeps the widening linear in a long run of matches)."""
    while start > floor and text[start - 1] in _TOKEN_CHARS:
        start -= 1
    n = len(text)
    while end < n and text[end] in _TOKEN_CHARS:
        end += 1
    return start, end


def _library_patterns(t: _Text) -> Iterator[Span]:
    lib = _library()
    rules = [r for r in lib.triggered if any(trigger in t.low for trigger in r.triggers)]
    if t.long_tokens:
        rules += [r for r in lib.untriggered if r.pattern.search(t.reduced)]
    text = t.text
    for rule in rules:
        covered = 0  # end of the last span of this rule: a match inside it is already redacted
        for m in rule.pattern.finditer(text):
            start, end = m.span(rule.group)
            if start >= end or end <= covered:
                continue
            if rule.group == 0:  # a token-shaped secret: the whole token goes, not the rule's fixed length
                start, end = _whole_token(text, max(start, covered), end, covered)
            covered = end
            yield start, end, rule.kind


# --- private keys ------------------------------------------------------------------------------------

# What may stand before a line's content in Markdown or plain text: indentation, list markers ("- ", "* ",
# "+ ", "• ", "1. ", "2) ") and quote marks (">", "> >"). A block pasted into a list or a quote carries one
# on every line, and each line may carry another ("- " on the first, "  " on the rest).
_LINE_PREFIX = r"[ \t]*(?:(?:>|(?:[-*+•]|\d{1,3}[.)])(?=[ \t]))[ \t]*)*"

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
# One part of a path or identifier made of ordinary words: lower, camelCase, PascalCase, UPPER, or digits.
_WORDLIKE = re.compile(r"(?:[a-z]+|[A-Z]?[a-z]+(?:[A-Z][a-z]+)*|[A-Z]+)[0-9]*|[0-9]+")


def _wordlike(value: str) -> bool:
    """True when every part of ``value`` (split at / _ - + = .) is an ordinary word or CamelCase run."""
    return all(_WORDLIKE.fullmatch(part) for part in re.split(r"[/_+=.-]+", value) if part)


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


# A value may also start the next line, after its layout prefix ("Authorization:\n  Bearer ..."): a parser
# that joins continuation lines would put it right after its key.
_NEXT_LINE = rf"(?:\r?\n{_LINE_PREFIX})?"
_AUTH_HEADER = re.compile(
    rf"(?i:authorization)[\"']?[ \t]*[:=][ \t]*{_NEXT_LINE}[\"']?"
    rf"(?:(?i:bearer|basic|token|digest|negotiate|aws4-hmac-sha256)(?:[ \t]+|[ \t]*\r?\n[ \t]+))?"
    r"(?P<v>[^\s\"'\[][^\s\"']{7,})"
)
_BEARER = re.compile(r"(?i:\bbearer)(?:[ \t]+|[ \t]*\r?\n[ \t]+)(?P<v>[A-Za-z0-9._~+/-]{16,}=*)")
_TRAILING = ".,;:)]}>"  # sentence punctuation after a bare value ("!" and "?" often end a password)


def _auth_headers(t: _Text) -> Iterator[Span]:
    for pattern, trigger in ((_AUTH_HEADER, "authorization"), (_BEARER, "bearer")):
        if trigger in t.low:
            for m in pattern.finditer(t.text):
                value = m.group("v").rstrip(_TRAILING)
                yield m.start("v"), m.start("v") + len(value), "bearer-token"


# --- assignments: key=value, key: value, "key": "value" ----------------------------------------------

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


# --- putting it together -----------------------------------------------------------------------------

_FINDERS: tuple[Callable[[_Text], Iterator[Span]], ...] = (
    _private_keys,
    _library_patterns,
    _jwts,
    _bare_aws_secrets,
    _auth_headers,
    _assignments,
    _stated_passwords,
)
_PRIORITY = {kind: i for i, kind in enumerate(KINDS)}


def _merge(spans: list[Span]) -> list[Span]:
    """Union overlapping spans; a merged span takes the most specific kind (the earliest in KINDS)."""
    merged: list[Span] = []
    for start, end, kind in sorted(spans):
        if merged and start < merged[-1][1]:
            m_start, m_end, m_kind = merged[-1]
            best = kind if _PRIORITY[kind] < _PRIORITY[m_kind] else m_kind
            merged[-1] = (m_start, max(m_end, end), best)
        else:
            merged.append((start, end, kind))
    return merged


# Without a long token, only these (lower-case) substrings can start a finding: the rules' triggers.
_ANY_TRIGGER = ("private", "putty-user-key-file", "eyj", "authorization", "bearer", "xox", "hooks.slack.com")
_ANY_TRIGGER += ("aws", "://", *_KEY_TRIGGERS)


def find_secrets(text: str) -> list[Span]:
    """Every secret in ``text`` as sorted, non-overlapping ``(start, end, kind)`` spans."""
    t = _Text(text)
    if not t.long_tokens and not any(trigger in t.low for trigger in _ANY_TRIGGER):
        return []  # most short fields (titles, app names) end here
    spans = [span for finder in _FINDERS for span in finder(t)]
    return _merge(spans)


_TALLY: ContextVar[Counter[str] | None] = ContextVar("memoryd_redact_tally", default=None)


@contextlib.contextmanager
def tally() -> Iterator[Counter[str]]:
    """While open: by kind, the secrets every :func:`redact` call of this context (this thread or task)
    replaces, so what was redacted to produce a whole answer (an export) counts once, and a placeholder the
    texts held already never. Tallies nest: the innermost counts."""
    counts: Counter[str] = Counter()
    token = _TALLY.set(counts)
    try:
        yield counts
    finally:
        _TALLY.reset(token)


def redact(text: str) -> Redacted:
    """Replace every secret in ``text`` with ``[REDACTED:<kind>]`` (kinds and their rules: :data:`KINDS`).

    Idempotent: ``redact(redact(t).text)`` changes nothing and counts nothing (a placeholder in the text
    given is kept as it is, and marked not ``fresh``). Never raises for a ``str``.
    The first call imports detect-secrets (see :func:`warm`).
    """
    spans = find_secrets(text) if text else []
    given = bool(text) and "[REDACTED:" in text  # placeholders already there are kept, never counted
    if not spans:
        return Redacted(text, {}, tuple(False for _ in PLACEHOLDERS.finditer(text)) if given else None)
    out: list[str] = []
    counts: dict[str, int] = {}
    fresh: list[bool] = []
    pos = 0
    for start, end, kind in spans:
        out.append(text[pos:start])
        out.append(PLACEHOLDER.format(kind=kind))
        if given:
            fresh.extend(False for _ in PLACEHOLDERS.finditer(text, pos, start))
            fresh.append(True)
        counts[kind] = counts.get(kind, 0) + 1
        pos = end
    out.append(text[pos:])
    if (tallied := _TALLY.get()) is not None:
        tallied.update(counts)
    if given:
        fresh.extend(False for _ in PLACEHOLDERS.finditer(text, pos))
    return Redacted("".join(out), counts, tuple(fresh) if given else None)
