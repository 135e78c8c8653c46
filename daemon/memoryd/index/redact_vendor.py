"""Fixed-shape vendor tokens: detect-secrets' plugin patterns plus our own for the tokens it does not know.

Each rule runs only when one of its lower-case trigger substrings occurs in the text, or (no triggers) when
its pattern first matches one of the text's long tokens. A match of a whole-token rule is widened to the
whole token, so a key longer than its rule's fixed length never leaves its tail in clear text.
detect-secrets is imported on first use (:func:`memoryd.index.redact.warm` does it ahead of time).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache

from memoryd.index.redact_text import Span, _Text


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
