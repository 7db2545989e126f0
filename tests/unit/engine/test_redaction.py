"""Secret masking: one row per string or key that must (or must not) be masked."""

from __future__ import annotations

import base64
import hashlib
from collections import namedtuple
from typing import Any

import pytest

from toolagent.model import redaction
from toolagent.model.redaction import REDACTED, is_sensitive_key, key_parts, looks_random, redact, redact_text

# Fixed, obviously fake key material so the cases are deterministic.
B64_KEY = base64.b64encode(hashlib.sha256(b"fixture").digest()).decode()  # 44 chars, random-looking
HEX_KEY = hashlib.sha256(b"fixture").hexdigest()
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)


@pytest.mark.parametrize(
    ("key", "sensitive"),
    [
        ("password", True),
        ("Password", True),
        ("PASSWORD", True),
        ("passwd", True),
        ("pwd", True),
        ("db_pass", True),
        ("passphrase", True),
        ("user_password", True),
        ("userPassword", True),
        ("dbpassword", True),
        ("password_hash", True),
        ("passwords", True),
        ("secret", True),
        ("client_secret", True),
        ("clientSecret", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("secrets", True),
        ("token", True),
        ("access_token", True),
        ("accessToken", True),
        ("refresh_token", True),
        ("authToken", True),
        ("id_token", True),
        ("X-Auth-Token", True),
        ("key", True),
        ("api_key", True),
        ("apiKey", True),
        ("apikey", True),
        ("API_KEY", True),
        ("x-api-key", True),
        ("X-API-KEY", True),
        ("access_key", True),
        ("accessKey", True),
        ("private_key", True),
        ("privateKey", True),
        ("signing_key", True),
        ("openai.api_key", True),
        ("authorization", True),
        ("Authorization", True),
        ("proxy-authorization", True),
        ("auth", True),
        ("cookie", True),
        ("Cookie", True),
        ("Set-Cookie", True),
        ("cookies", True),
        ("credential", True),
        ("credentials", True),
        ("creds", True),
        ("aws_credentials", True),
        ("session", True),
        ("session_id", True),
        ("sessionId", True),
        ("JSESSIONID", True),
        ("session_token", True),
        ("bearer", True),
        ("bearer_token", True),
        ("jwt", True),
        ("signature", True),
        ("x-hub-signature", True),
        ("csrf_token", True),
        ("csrftoken", True),
        ("otp", True),
        ("pin", True),
        ("dsn", True),
        # judged by their words, not only their ends: the word after the secret decides "about"
        ("SECRET_TOKEN_IN_ENV", True),
        ("github_token_for_ci", True),
        ("password2", True),
        ("db_password_2", True),
        ("apiKey2", True),
        ("secret_key_v2", True),
        ("old_password_hash_v1", True),
        # not secrets
        ("secret_token_env", False),
        ("password2_required", False),
        ("max_tokens_2", False),
        ("keyword2", False),
        ("keyword", False),
        ("keywords", False),
        ("monkey", False),
        ("turkey", False),
        ("hotkey", False),
        ("keys", False),
        ("tokens", False),
        ("max_tokens", False),
        ("maxTokens", False),
        ("prompt_tokens", False),
        ("tokenizer", False),
        ("token_type", False),
        ("tokenType", False),
        ("token_url", False),
        ("token_expires_at", False),
        ("key_id", False),
        ("keyId", False),
        ("access_key_id", False),
        ("api_key_header", False),
        ("secret_name", False),
        ("password_file", False),
        ("password_required", False),
        ("primary_key", False),
        ("foreign_key", False),
        ("sort_key", False),
        ("partition_key", False),
        ("cache_key", False),
        ("idempotency_key", False),
        ("public_key", False),
        ("publicKey", False),
        ("page_token", False),
        ("next_page_token", False),
        ("nextToken", False),
        ("author", False),
        ("authors", False),
        ("passenger", False),
        ("bypass", False),
        ("secretary", False),
        ("compass", False),
        ("user", False),
        ("username", False),
        ("email", False),
        ("query", False),
        ("sql", False),
        ("tool", False),
        ("description", False),
        ("", False),
    ],
)
def test_sensitive_keys(key: str, sensitive: bool) -> None:
    assert is_sensitive_key(key) is sensitive


@pytest.mark.parametrize(
    ("key", "parts"),
    [
        ("apiKey", ["api", "key"]),
        ("x-api-key", ["x", "api", "key"]),
        ("API_KEY", ["api", "key"]),
        ("HTTPHeaderToken", ["http", "header", "token"]),
        ("openai.api_key", ["openai", "api", "key"]),
        ("keyword", ["keyword"]),
    ],
)
def test_key_parts(key: str, parts: list[str]) -> None:
    assert key_parts(key) == parts


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # connection URLs
        ("postgresql://user:hunter2@db.example.com:5432/app", f"postgresql://user:{REDACTED}@db.example.com:5432/app"),
        ("postgres://app:p%40ss@localhost/db", f"postgres://app:{REDACTED}@localhost/db"),
        ("redis://:p@ss@host/0", f"redis://:{REDACTED}@host/0"),
        (
            "connect to mysql://root:toor@10.0.0.1:3306 failed",
            f"connect to mysql://root:{REDACTED}@10.0.0.1:3306 failed",
        ),
        ("https://user:pw@example.com/a?b=1", f"https://user:{REDACTED}@example.com/a?b=1"),
        # headers and bearer credentials
        ("Authorization: Bearer abc.def-ghi123", f"Authorization: Bearer {REDACTED}"),
        ("authorization=Basic dXNlcjpwYXNzd29yZA==", f"authorization=Basic {REDACTED}"),
        ("Authorization: Digest username=x", f"Authorization: Digest {REDACTED}"),
        ('{"Authorization": "Bearer s3cr3t-value"}', f'{{"Authorization": "Bearer {REDACTED}"}}'),
        ("sent Bearer tok_123456789 upstream", f"sent Bearer {REDACTED} upstream"),
        ("X-Api-Key: secretvalue", f"X-Api-Key: {REDACTED}"),
        ("Cookie: sessionid=abc123", f"Cookie: {REDACTED}"),
        # key=value pairs in text, JSON and Python reprs
        ("password=hunter2", f"password={REDACTED}"),
        ("token=abc123&next=1", f"token={REDACTED}&next=1"),
        (
            "https://x.com/cb?code=1&access_token=ya29.abc&state=ok",
            f"https://x.com/cb?code=1&access_token={REDACTED}&state=ok",
        ),
        ('{"password": "a b c", "user": "bob"}', f'{{"password": "{REDACTED}", "user": "bob"}}'),
        ("{'api_key': 'xyz123'}", f"{{'api_key': '{REDACTED}'}}"),
        ("host=db user=x password=s3cret dbname=app", f"host=db user=x password={REDACTED} dbname=app"),
        ("client_secret = 'shh'", f"client_secret = '{REDACTED}'"),
        ("session_id=abcdef", f"session_id={REDACTED}"),
        ("pwd=abc", f"pwd={REDACTED}"),
        ("key=x", f"key={REDACTED}"),
        # JWTs, vendor keys, PEM blocks
        (JWT, REDACTED),
        (f"token in header: {JWT}.", f"token in header: {REDACTED}."),
        ("sk-proj-" + "A1b2" * 8, REDACTED),
        ("key sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345 set", f"key {REDACTED} set"),
        ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", REDACTED),
        ("rk_test_4eC39HqLyjWDarjtT1zdp7dc", REDACTED),
        ("ghp_" + "a1B2" * 9, REDACTED),
        ("github_pat_11ABCDEFG0123456789_abcdefghijk", REDACTED),
        ("xoxb-1234567890-abcdefghij", REDACTED),
        ("xoxp-1234567890-abcdefghij", REDACTED),
        ("aws AKIAIOSFODNN7EXAMPLE used", f"aws {REDACTED} used"),
        ("AIzaSyA1234567890abcdefghijklmnopqrstuv", REDACTED),
        ("glpat-abcdefghij0123456789", REDACTED),
        ("ta_" + "Zx9_" * 6, REDACTED),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n-----END RSA PRIVATE KEY----- after", f"{REDACTED} after"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1r", REDACTED),
        # long random runs
        (f"digest {HEX_KEY}", f"digest {REDACTED}"),
        (f"b64 {B64_KEY} end", f"b64 {REDACTED} end"),
    ],
)
def test_redacted_text(text: str, expected: str) -> None:
    assert redact_text(text) == expected
    assert redact_text(expected) == expected  # masking is idempotent: nothing masked is masked again


@pytest.mark.parametrize(
    "masked",
    [
        f"password={REDACTED}",
        f"password: {REDACTED} and more",
        f"token={REDACTED}&x=1",
        f"X-Api-Key: {REDACTED}",
        f"pwd={REDACTED},user=bob",
        f"passwords={REDACTED} {REDACTED}",
        f"SECRET_TOKEN_IN_ENV={REDACTED}",
    ],
)
def test_masked_text_is_left_as_it_is(masked: str) -> None:
    assert redact_text(masked) == masked
    assert redact({"log": masked, "password": REDACTED}) == {"log": masked, "password": REDACTED}


def test_a_remembered_secret_inside_the_mask_does_not_break_the_mask() -> None:
    import contextvars

    def inside() -> str:
        redaction.remember_secrets({"password": "DACT"})
        return redact_text(f"password={REDACTED} DACT")

    assert contextvars.copy_context().run(inside) == f"password={REDACTED} {REDACTED}"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "short",
        "bearer of bad news",
        "the bearer instrument",
        "keyword: value",
        "monkey=banana",
        "max_tokens=200",
        "token_type=bearer",
        "password: null",
        "password=true",
        'password: " "',
        "the password is required",
        "select * from users where id = 1 limit 10",
        "uuid 1cc5fa5e-108e-4a77-a938-23c6c45a7d7c",
        "commit 8e83953",
        "run_1732290000000_a1b2c3d4",
        "path /usr/local/lib/python3.11/site-packages/toolagent/engine/redaction.py",
        "https://example.com/api/v1/organizations/demo/agents/supabase-agent?limit=10",
        "http://localhost:8080/health",
        "ident my-very-long-kebab-case-identifier-v2-Final-Version",
        "camel thisIsAVeryLongCamelCaseIdentifierName2",
        "getUserAccountSettingsByOrganizationId42",
        "supercalifragilisticexpialidociousXYZ123",
        "00000000000000000000000000000000000000000000",
        "12345678901234567890123456789012345678",
        "sk-short",
        "ta_short",
        "skip the task",
        "AKIA is a prefix",
        "tool 'supabase/execute-sql' failed: relation \"users\" does not exist",
    ],
)
def test_text_left_alone(text: str) -> None:
    assert redact_text(text) == text


def test_redact_masks_values_under_sensitive_keys_deeply() -> None:
    data: dict[str, Any] = {
        "query": "select 1",
        "password": "hunter2",
        "headers": {"Authorization": "Bearer abc", "Accept": "application/json", "X-Api-Key": "k"},
        "nested": [{"apiKey": "k1"}, {"keyword": "fine"}, ("token", "t"), {"credentials": {"user": "u", "pw": "p"}}],
        "note": "dsn postgresql://u:pw@h/db",
        "pin": 1234,
        "token": None,
        "secret": False,
        "limit": 10,
        "ratio": 0.5,
    }
    out = redact(data)
    assert out == {
        "query": "select 1",
        "password": REDACTED,
        "headers": {"Authorization": REDACTED, "Accept": "application/json", "X-Api-Key": REDACTED},
        "nested": [{"apiKey": REDACTED}, {"keyword": "fine"}, ("token", "t"), {"credentials": REDACTED}],
        "note": f"dsn postgresql://u:{REDACTED}@h/db",
        "pin": REDACTED,
        "token": None,
        "secret": False,
        "limit": 10,
        "ratio": 0.5,
    }
    # a deep copy: the input is untouched and shares nothing mutable with the output
    assert data["password"] == "hunter2"
    assert out["nested"] is not data["nested"]
    assert out["headers"] is not data["headers"]


def test_redact_keeps_container_types() -> None:
    Pair = namedtuple("Pair", "name value")
    out = redact({"t": ("a", f"Bearer {B64_KEY}"), "s": {"x"}, "f": frozenset({"y"}), "p": Pair("n", "password=x")})
    assert out["t"] == ("a", f"Bearer {REDACTED}")
    assert out["s"] == {"x"} and isinstance(out["f"], frozenset)
    assert out["p"] == Pair("n", f"password={REDACTED}") and isinstance(out["p"], Pair)


@pytest.mark.parametrize("value", [None, True, 1, 2.5, "plain", [], {}])
def test_redact_scalars_and_empties_pass_through(value: Any) -> None:
    assert redact(value) == value


def test_redact_non_string_keys_and_unknown_objects() -> None:
    class Thing:
        def __init__(self) -> None:
            self.items = [1]

    thing = Thing()
    out = redact({1: "a", "obj": thing})
    assert out[1] == "a"
    assert isinstance(out["obj"], Thing) and out["obj"] is not thing and out["obj"].items == [1]


def test_redact_bounds_recursion() -> None:
    deep: Any = "leaf"
    for _ in range(200):
        deep = [deep]
    out = redact(deep)
    for _ in range(65):
        out = out[0]
    assert out == REDACTED


@pytest.mark.parametrize(
    ("run", "random"),
    [
        (HEX_KEY, True),
        (B64_KEY, True),
        ("a" * 40, False),
        ("ab" * 20, False),
        ("getUserAccountSettingsByOrganizationId42", False),
        ("x1Y2z3" * 2, False),  # too short
    ],
)
def test_looks_random(run: str, random: bool) -> None:
    assert looks_random(run) is random


@pytest.mark.timeout(60)  # a hang guard, not a measure: bench/ times the scan
@pytest.mark.parametrize(
    "text",
    [
        "a-" * 200_000,
        "a.b" * 120_000,
        "a:" * 200_000,
        "eyJ-" * 120_000,
        "a://b:" * 80_000,
        "sk-" * 120_000,
        "password=" * 120_000,
        "authorization: " * 80_000,
        "bearer " * 120_000,
        B64_KEY * 12_000,
    ],
)
def test_adversarial_text_is_scanned_in_linear_time(text: str) -> None:
    # At a quarter of these sizes each took tens of seconds with a pattern that could restart
    # inside a run (quadratic: sixteen times that here); a linear scan takes well under a second.
    redacted = redact_text(text)
    assert 0 < len(redacted) <= len(text)


def test_binary_media_in_content_blocks_is_kept_but_text_like_blocks_are_scanned() -> None:
    import base64
    import os

    png = base64.b64encode(os.urandom(600)).decode()
    # Random key material without "/": a run holding "//" reads as a path (`looks_random`), which
    # about one random 64-character base64 run in sixty-five does.
    secret = base64.b64encode(os.urandom(48)).decode().replace("/", "x")
    blocks = [
        {"type": "image", "mimeType": "image/png", "data": png},
        {"type": "resource", "resource": {"uri": "file:///x.bin", "mimeType": "application/octet-stream", "blob": png}},
        {"type": "resource", "resource": {"uri": "file:///k.txt", "mimeType": "text/plain", "blob": secret}},
        {"type": "resource", "resource": {"uri": "file:///k.json", "mimeType": "application/json", "text": secret}},
        {"type": "text", "text": f"key {secret}"},
    ]
    out = redact(blocks)
    assert out[0]["data"] == png and out[1]["resource"]["blob"] == png
    assert out[2]["resource"]["blob"] == REDACTED and out[3]["resource"]["text"] == REDACTED
    assert out[4]["text"] == f"key {REDACTED}"


def _every_rule(text: str) -> str:
    """`text` through every shape rule, with no pre-check: what the pre-check must never skip."""
    for step in redaction._STEPS:
        text = step(text)
    return text


def test_the_pre_check_never_skips_text_a_shape_rule_would_change() -> None:
    # Pieces of every rule's trigger, shuffled into random texts: a text the rules change must
    # pass the cheap pre-check, or a secret would be stored as it is.
    import random

    pieces = [
        "bearer ",
        "Bearer ",
        "Authorization",
        ": ",
        "=",
        "://",
        "u:p@h",
        "eyJ",
        "abcdefgh.",
        "-----BEGIN ",
        "RSA PRIVATE KEY-----",
        "sk-",
        "sk_live_",
        "rk_test_",
        "whsec_",
        "ghp_",
        "github_pat_",
        "glpat-",
        "xoxb-",
        "AKIA",
        "AIza",
        "npm_",
        "hf_",
        "ta_",
        "password",
        "token",
        " ",
        "x",
        "Q9z",
        "0123456789",
        "aB3" * 4,
        "/",
        "-",
        "_",
        "'",
        '"',
        HEX_KEY[:20],
        B64_KEY[:20],
    ]
    rng = random.Random(7)
    changed = 0
    for _ in range(5000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))
        if _every_rule(text) != text:
            changed += 1
            assert redaction._MAYBE_SECRET.search(text), text
    assert changed > 500  # the corpus does exercise the rules


def test_long_and_repeated_texts_are_masked_alike() -> None:
    # Short texts are cached, long ones are not; both give the same answer, every time.
    short = "password=hunter2"
    long = "x " * 200 + short
    for _ in range(2):
        assert redact_text(short) == f"password={REDACTED}"
        assert redact_text(long) == "x " * 200 + f"password={REDACTED}"
