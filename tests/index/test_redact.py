"""Redaction (issues 2.7 and 4.3): every kind is caught, the planted board secrets vanish, ordinary text stays."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from memoryd.index.redact import KINDS, PLACEHOLDER, Redacted, find_secrets, redact

AWS_DOC_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
AWS_DOC_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
PEM_BODY = (
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0\n/IzW7yWR7QkrmBL7jTKEn5u"
)
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)

# (text, kind that must be reported, the secret that must be gone)
CAUGHT = [
    (f"signed with access key {AWS_DOC_KEY_ID}, the old static key", "aws-access-key-id", AWS_DOC_KEY_ID),
    ("temporary creds ASIAY34FZKBOKMUTVV7A were used", "aws-access-key-id", "ASIAY34FZKBOKMUTVV7A"),
    (f"export AWS_SECRET_ACCESS_KEY={AWS_DOC_SECRET}", "aws-secret-key", AWS_DOC_SECRET),
    (
        f"the key is {AWS_DOC_SECRET} (rotated since)",
        "aws-secret-key",
        AWS_DOC_SECRET,
    ),  # no keyword, no quotes
    (f'aws_secret = "{AWS_DOC_SECRET}"', "aws-secret-key", AWS_DOC_SECRET),
    (f"スクリーンに{AWS_DOC_SECRET}が見えた", "aws-secret-key", AWS_DOC_SECRET),
    (
        "token ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8 here",
        "github-token",
        "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    ),
    ("gho_16C7e42F292c6912E7710c838347Ae178B4a", "github-token", "gho_16C7e42F292c6912E7710c838347Ae178B4a"),
    (
        "GH=github_pat_11ABCDEFG0aBcDeFgHiJkL_mNoPqRsTuVwXyZ0123456789aBcDeFgHiJkLmNoPqRsTuVwXyZ01234",
        "github-token",
        "github_pat_11ABCDEFG0aBcDeFgHiJkL",
    ),
    ("CI uses glpat-xYz12345678901234567 for pushes", "gitlab-token", "glpat-xYz12345678901234567"),
    (
        "bot xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "slack-token",
        "AbCdEfGhIjKlMnOpQrStUvWx",
    ),
    ("xoxp-1234567890-1234567890-1234567890-abcdef0123456789", "slack-token", "abcdef0123456789"),
    (
        "post to https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX now",
        "slack-webhook",
        "XXXXXXXXXXXXXXXXXXXXXXXX",
    ),
    (
        f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----",
        "private-key",
        "u1SU1LfVLPHCozMx",
    ),
    (
        f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}\n-----END OPENSSH PRIVATE KEY-----",
        "private-key",
        "IzW7yWR7",
    ),
    (f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}", "private-key", "IzW7yWR7"),  # cut off before END
    (
        '{"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n-----END PRIVATE KEY-----\\n"}',
        "private-key",
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
    ),
    (
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: x\n\nlQOYBF1234abcd\n-----END PGP PRIVATE KEY BLOCK-----",
        "private-key",
        "lQOYBF1234abcd",
    ),
    (f"cookie sf_session={JWT}; Path=/", "jwt", "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"),
    (f"Authorization: Bearer {JWT}", "jwt", "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"),
    ("Authorization: Bearer 7f3a9c2e1b8d4f6a0c5e", "bearer-token", "7f3a9c2e1b8d4f6a0c5e"),
    ("curl -H 'Authorization: Basic dXNlcjpodW50ZXIy'", "bearer-token", "dXNlcjpodW50ZXIy"),
    ("DATABASE_URL=postgres://admin:S3cretPass@db.internal:5432/app", "url-password", "S3cretPass"),
    ("password=hunter2", "secret-assignment", "hunter2"),
    ("password=mypassword123", "secret-assignment", "mypassword123"),
    ("pw=hunter22 ok", "secret-assignment", "hunter22"),
    ("passwd: s3cr3t!", "secret-assignment", "s3cr3t!"),
    ("token: abc123def456", "secret-assignment", "abc123def456"),
    ('secret="Summer2024!"', "secret-assignment", "Summer2024!"),
    ("api_key=AKfoo123bar", "secret-assignment", "AKfoo123bar"),
    ('"client_secret": "swordfish-horse-battery"', "secret-assignment", "swordfish-horse-battery"),
    ("db_password: swordfish", "secret-assignment", "swordfish"),
    ("export PGPASSWORD='correct horse'", "secret-assignment", "correct horse"),
    ("X-Api-Key: 9f8e7d6c5b4a39281706", "secret-assignment", "9f8e7d6c5b4a39281706"),
    ("--github-api-token='mytoken'", "secret-assignment", "mytoken"),
    ("GET /v1/items?access_token=Zx8Qw3Er5Ty7Ui9Op&page=2", "secret-assignment", "Zx8Qw3Er5Ty7Ui9Op"),
    (
        "secret_key_base = 6c8f1e2a9b7d4c3e5f6a7b8c9d0e1f2a3b4c5d6e7f8a",
        "secret-assignment",
        "6c8f1e2a9b7d4c3e5f6a",
    ),
    ("nonce=9f86d081884c7d659a2feaa0c55ad015", "high-entropy", "9f86d081884c7d659a2feaa0c55ad015"),
    ('"signature": "Zk3Pq9Wm2Xr7Lt5Vb8Nc1Hd4"', "high-entropy", "Zk3Pq9Wm2Xr7Lt5Vb8Nc1Hd4"),
    ("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", "api-key", "4eC39HqLyjWDarjtT1zdp7dc"),
    ("the db password is 0jPZ4Rez9kLmQ2, ask ops", "stated-password", "0jPZ4Rez9kLmQ2"),
    ("maps AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "api-key", "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"),
    (
        "ANTHROPIC_API_KEY sk-ant-api03-Zq4Wm8Xr2Lt6Vb0Nc3Hd7Jf1Kg5Ps9Qy-_T2uE6iO0aS4dF8gH",
        "api-key",
        "Zq4Wm8Xr2Lt6Vb0Nc3Hd7Jf1Kg5Ps9Qy",
    ),
    (
        "use sk-proj-Xa7Bc9De1Fg3Hi5Jk7Lm9No1Pq3Rs5Tu7Vw9 here",
        "api-key",
        "Xa7Bc9De1Fg3Hi5Jk7Lm9No1Pq3Rs5Tu7Vw9",
    ),
]

# Ordinary lines a memory server must hand back intact.
UNCHANGED = [
    "ok so this is the one support keeps pinging us about",
    "if your session's expired and you open your account page it just... bounces",
    "Trace every redirect in the loop and tell me which code issues each one.",
    "- apps/web/src/app/(auth)/login/page.tsx",
    "apps/web/src/components/ProductCard/ProductCardView.tsx and src/components/CheckoutButton/index.tsx",
    "see https://github.com/acme/shopfront/pull/1423 and https://docs.example.com/api/v2/idempotency?lang=en",
    "reverted da39a3ee5e6b4b0d3255bfef95601890afd80709 after the deploy",
    "commit=da39a3ee5e6b4b0d3255bfef95601890afd80709",
    "request id 3f2504e0-4f89-11d3-9a0c-0305e82c3301 failed with 409 idempotency_in_progress",
    "Idempotency-Key: 3f2504e0-4f89-11d3-9a0c-0305e82c3301",
    "ERR_TOO_MANY_REDIRECTS on shop.example.com/account",
    "ReconUnexplainedMismatch alert fires when AbstractSingletonProxyFactoryBeanHelper1 is null",
    'actions   = ["route53:GetChange", "route53:ListHostedZonesByName"]',
    "--- PASS: TestToMinor/JPY (0.00s)",
    "Password: reset it tomorrow. The token: expired yesterday.",
    "refresh tokens are single use on the API side, see rotation in the response",
    "max_tokens=512 tokenizer: icu token_type=bearer secret_name=prod/db/main",
    "password = self.password; api_key=settings.API_KEY; token = os.environ['TOKEN']",
    "password = password; api_key = api_key; token=accessToken; pass=getpass.getpass()",
    "password: ${DB_PASSWORD} token: <your-token> secret=*** AWS_ACCESS_KEY_ID=***",
    "PWD=/home/me/src/shopfront",
    "bhai checkout wala button kaam nahi kar raha, thoda dekh lo na",
    "ログインとアカウントの間でリダイレクトがループしています",
    "arn:aws:iam::123456789012:user/ci-deployer",
    "old key deactivated 16:19 UTC, deleted 16:45 UTC; state 1024 = verification failed",
    "the API key is in 1Password; ask for the secret in #payments-dev",
]


@pytest.mark.parametrize(("text", "kind", "secret"), CAUGHT)
def test_each_kind_is_caught(text, kind, secret):
    result = redact(text)
    assert secret not in result.text
    assert PLACEHOLDER.format(kind=kind) in result.text
    assert result.counts.get(kind, 0) >= 1 and result.total >= 1
    assert kind in KINDS


@pytest.mark.parametrize(("text", "kind", "secret"), CAUGHT)
def test_redaction_is_idempotent(text, kind, secret):
    once = redact(text)
    twice = redact(once.text)
    assert twice.text == once.text and twice.counts == {}


def test_keys_are_kept_and_only_values_go():
    assert redact("password=hunter2 user=bob").text == "password=[REDACTED:secret-assignment] user=bob"
    assert redact('{"api_key": "k3y-v4lue-here"}').text == '{"api_key": "[REDACTED:secret-assignment]"}'


@pytest.mark.parametrize("line", UNCHANGED)
def test_ordinary_lines_are_unchanged(line):
    assert redact(line) == Redacted(line, {})


def test_every_kind_is_documented_and_reachable():
    reached = {kind for _, kind, _ in CAUGHT}
    assert reached == set(KINDS)
    assert all(KINDS[kind] for kind in KINDS)


def test_offsets_survive_non_ascii_case_mapping():
    text = f"İİİ ß ﬁ {AWS_DOC_KEY_ID} tail"  # "İ".lower() is two characters
    assert redact(text).text == "İİİ ß ﬁ [REDACTED:aws-access-key-id] tail"


def test_several_secrets_in_one_text_are_counted():
    text = f"{AWS_DOC_KEY_ID}\n{AWS_DOC_SECRET}\npassword=hunter2\n{AWS_DOC_KEY_ID}"
    result = redact(text)
    assert result.counts == {"aws-access-key-id": 2, "aws-secret-key": 1, "secret-assignment": 1}
    assert [kind for _, _, kind in find_secrets(text)] == [
        "aws-access-key-id",
        "aws-secret-key",
        "secret-assignment",
        "aws-access-key-id",
    ]


def test_empty_and_blank_text():
    assert redact("") == Redacted("", {})
    assert redact(" \n\t") == Redacted(" \n\t", {})


# --- layouts: a secret written across lines, as lists, quotes and indented blocks keep it --------------

PEM_LINES = ["-----BEGIN RSA PRIVATE KEY-----", *PEM_BODY.splitlines(), "-----END RSA PRIVATE KEY-----"]
PREFIXES = {
    "bullets": ["- "] * 4,
    "stars": ["* "] * 4,
    "numbered": ["1. ", "2. ", "3. ", "4. "],
    "quote": ["> "] * 4,
    "nested quote": ["> > "] * 4,
    "continuation": ["- ", "  ", "  ", "  "],
    "indented": ["    "] * 4,
}


@pytest.mark.parametrize("layout", sorted(PREFIXES))
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_private_key_block_is_one_block_whatever_its_line_prefixes(layout, newline):
    lines = [prefix + line for prefix, line in zip(PREFIXES[layout], PEM_LINES, strict=True)]
    text = newline.join(["Rotated the deploy key:", *lines, "- then restarted the job"])
    result = redact(text)
    assert result.counts == {"private-key": 1}
    # one placeholder from BEGIN through the END line: no body line and no marker is left in any line
    for piece in (*PEM_BODY.splitlines(), "PRIVATE KEY", "-----"):
        assert piece not in result.text
    assert result.text.startswith("Rotated the deploy key:" + newline + PREFIXES[layout][0] + "[REDACTED:")
    assert result.text.endswith("- then restarted the job")


SPLIT = [
    # (text, the value that must go): the value starts the line after its key
    ("password:\n  Xy9kLm2Pq7w!", "Xy9kLm2Pq7w!"),
    ("- db_password:\n- Xy9kLm2Pq7w!", "Xy9kLm2Pq7w!"),
    ("> api_token =\n> Rt5Yu8Io2Pa6Sd4Fg7Hj1Kl3Zx9Cv", "Rt5Yu8Io2Pa6Sd4Fg7Hj1Kl3Zx9Cv"),
    ("secret_key:\r\n    Rt5Yu8Io2Pa6Sd4Fg7Hj1Kl3Zx9Cv", "Rt5Yu8Io2Pa6Sd4Fg7Hj1Kl3Zx9Cv"),
    ("- Authorization:\n  Bearer Hy7Tg5Rf3Ed1Ws9Qa8Zx6Cv4Bn2Mk0Lp", "Hy7Tg5Rf3Ed1Ws9Qa8Zx6Cv4Bn2Mk0Lp"),
    ("- Authorization: Bearer\n  Hy7Tg5Rf3Ed1Ws9Qa8Zx6Cv4Bn2Mk0Lp", "Hy7Tg5Rf3Ed1Ws9Qa8Zx6Cv4Bn2Mk0Lp"),
    # a key line over a nested mapping: the nested assignment is still judged on its own
    ("credentials:\n  password: hunter2x", "hunter2x"),
    ("secrets:\n  api_key: Rt5Yu8Io2Pa6Sd4Fg7Hj1Kl3Zx9Cv", "Rt5Yu8Io2Pa6Sd4Fg7Hj1Kl3Zx9Cv"),
    ("password:\n  db_password: hunter2x", "hunter2x"),
    ("token:\n  value: Rt5Yu8Io2Pa6Sd4Fg7Hj1Kl3Zx9Cv", "Rt5Yu8Io2Pa6Sd4Fg7Hj1Kl3Zx9Cv"),
]
SPLIT_PROSE = [
    "Password:\n- reset it from the admin portal",
    "The token:\n- rotate it every month",
    "secrets:\n  api_key: ${API_KEY}",
    "password:\n  valueFrom:\n    secretKeyRef: db",
    "## Did\n- password:\n\n## Open\n- none",
    "The keys are:\n- one per region",
]


@pytest.mark.parametrize(("text", "secret"), SPLIT)
def test_a_value_on_the_line_after_its_key_is_redacted(text, secret):
    result = redact(text)
    assert secret not in result.text and result.total == 1


@pytest.mark.parametrize("text", SPLIT_PROSE)
def test_prose_and_references_after_a_key_line_stay(text):
    assert redact(text) == Redacted(text, {})


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "text",
    [
        "a=" * 100_000,
        "password=" * 50_000,
        "-----BEGIN PRIVATE KEY-----" * 20_000,
        "-----BEGIN PRIVATE KEY-----\n" + "A" * 1_000_000,
        "eyJ" + "a" * 500_000 + "." * 10_000,
        "x" * 1_000_000,
        ("key: " + "Ab1/" * 10 + " ") * 20_000,
        "password:\n" * 100_000,
        "-----BEGIN PRIVATE KEY-----\n" + "- > 1. A\n" * 100_000,
        ">" * 1_000_000,
        "- " * 500_000,
        "token =\n" + " " * 1_000_000 + "x",
    ],
)
def test_pathological_inputs_finish(text):
    redact(text)  # bounded by the timeout: no regex may backtrack catastrophically


# --- the sample board --------------------------------------------------------------------------------

PLANTED = ("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
FRAGMENTS = ("wjalrxutnfemi", "k7mdeng", "bpxrficyexamplekey", "iosfodnn7", "kiaiosfodnn7exampl")
# Briefs whose text legitimately changes: the two planted secrets, a JWT on a screen, masked tokens in JSON.
EXPECTED_CHANGES = {
    "b-20260810-4f09bb": {"aws-access-key-id": 1},
    "b-20261002-0dcc2d": {"aws-secret-key": 1},
    "b-20260803-52ea08": {"jwt": 1},
    "b-20260806-4c8707": {"secret-assignment": 3},
}


def stored_texts(brief: Path) -> list[str]:
    """The stored texts of one brief folder as the reader redacts them: each file whole (``outcome.md`` and
    ``notes.md`` before they become bullets), each JSON string once decoded; screens whose ``.png`` exists."""
    meta = json.loads((brief / "brief.json").read_text())
    texts = [meta["title"], meta["summary"]]
    texts += [(brief / name).read_text() for name in ("said.txt", "prompt.md", "notes.md", "outcome.md")
              if (brief / name).exists()]  # fmt: skip
    for png in sorted(brief.glob("screens/*.png")):
        for suffix in (".txt", ".json"):
            path = png.with_suffix(suffix)
            if path.exists():
                text = path.read_text()
                texts += (
                    [v for v in json.loads(text).values() if isinstance(v, str)]
                    if suffix == ".json"
                    else [text]
                )
    return texts


@pytest.fixture(scope="module")
def sample_briefs(shared_board) -> dict[str, list[str]]:
    """brief id -> its stored texts, read from the files (the reader would hand them out redacted)."""
    return {p.name: stored_texts(p) for p in sorted((shared_board / "briefs").iterdir())}


def test_planted_secrets_are_redacted(sample_briefs):
    raw = "\n".join(t for texts in sample_briefs.values() for t in texts)
    assert all(secret in raw for secret in PLANTED)  # the board really plants them
    redacted = "\n".join(redact(t).text for texts in sample_briefs.values() for t in texts).lower()
    for piece in (*PLANTED, *FRAGMENTS):
        assert piece.lower() not in redacted


def test_the_rest_of_the_sample_board_is_untouched(sample_briefs):
    changed = {}
    for brief_id, texts in sample_briefs.items():
        counts: dict[str, int] = {}
        for text in texts:
            for kind, n in redact(text).counts.items():
                counts[kind] = counts.get(kind, 0) + n
        if counts:
            changed[brief_id] = counts
    assert changed == EXPECTED_CHANGES


def test_sample_board_redaction_is_idempotent(sample_briefs):
    for texts in sample_briefs.values():
        for text in texts:
            once = redact(text).text
            assert redact(once) == Redacted(once, {})


def test_placeholders_are_well_formed():
    text = " ".join(t for t, _, _ in CAUGHT)
    for placeholder in re.findall(r"\[REDACTED:[^\]]*\]", redact(text).text):
        assert placeholder[len("[REDACTED:") : -1] in KINDS


def test_fast_path_triggers_cover_every_triggered_rule():
    from memoryd.index.redact import _ANY_TRIGGER
    from memoryd.index.redact_assign import _KEY_TRIGGERS
    from memoryd.index.redact_vendor import _library

    assert set(_KEY_TRIGGERS) <= set(_ANY_TRIGGER)
    for rule in _library().triggered:
        assert set(rule.triggers) <= set(_ANY_TRIGGER), rule


def test_iso_times_are_never_secrets_and_take_no_long_token_path():
    from memoryd.index.redact_text import _Text

    for text in ("2026-12-03T07:00:00Z", "at 2026-12-03T07:00:00.123456+02:00 the deploy ran"):
        assert redact(text).text == text
        assert _Text(text).long_tokens == []  # the rules that need a long token are skipped
    # a time-shaped prefix does not hide what follows it in the same token, nor a key naming a secret
    assert "[REDACTED" in redact("token=2026-12-03T07:00:00Z12345abcdefABCDEF99").text
    assert redact("api_key: 2026-12-03T07:00:00Z").text == "api_key: [REDACTED:secret-assignment]"
