"""Secret redaction: run on every text before it is indexed and again on every answer.

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

This module owns the public surface (the placeholder, the kinds and their priority, merging the findings,
:func:`redact`, :func:`tally`); the rules live beside it: ``redact_text`` (what every rule looks at),
``redact_vendor`` (detect-secrets and the vendor token shapes), ``redact_shapes`` (private keys, bare AWS
secrets, JWTs, Authorization headers) and ``redact_assign`` (assignments and passwords stated in prose).
"""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field

from memoryd.index.redact_assign import _KEY_TRIGGERS, _assignments, _stated_passwords
from memoryd.index.redact_shapes import _auth_headers, _bare_aws_secrets, _jwts, _private_keys
from memoryd.index.redact_text import Span, _Text
from memoryd.index.redact_vendor import _library, _library_patterns

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


def warm() -> None:
    """Load detect-secrets now, so the first :func:`redact` does not pay the ~0.3 s import."""
    _library()


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
