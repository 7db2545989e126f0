"""Which keys name a secret: a mapping value is masked whole when its key does (`redaction`).

Keys are split into word parts (`_`, `-`, `.`, spaces and camelCase), so `api_key`, `apiKey`,
`X-Api-Key` and `key` match while `keyword`, `monkey` and `max_tokens` do not; a trailing number
does not hide a word (`password2`, `apiKey2`). Keys that name *about* a secret (`key_id`,
`token_type`, `password_file`) and well-known non-secret keys (`primary_key`, `public_key`,
`page_token`) are left alone. "About" is judged by the word right after the last secret word, not
by the key's end: `token_env` names where a token is kept, `SECRET_TOKEN_IN_ENV` holds one.
"""

from __future__ import annotations

import functools
import re

#: Word parts that make a key sensitive.
_SENSITIVE_PARTS = frozenset(
    {
        "password",
        "passwords",
        "passwd",
        "pwd",
        "pass",
        "passphrase",
        "secret",
        "secrets",
        "token",
        "key",
        "authorization",
        "auth",
        "cookie",
        "cookies",
        "credential",
        "credentials",
        "creds",
        "session",
        "sessionid",
        "sessid",
        "phpsessid",
        "jsessionid",
        "bearer",
        "jwt",
        "signature",
        "sig",
        "otp",
        "pin",
        "csrf",
        "xsrf",
        "dsn",
    }
)
#: Single-word compounds of a sensitive word (`apikey`, `accesstoken`).
_SENSITIVE_COMPOUNDS = frozenset(
    {
        "apikey",
        "accesskey",
        "secretkey",
        "privatekey",
        "authkey",
        "signingkey",
        "masterkey",
        "encryptionkey",
        "sshkey",
        "licensekey",
        "webhookkey",
    }
)
#: Suffixes that make a whole word part sensitive (`clientsecret`, `authtoken`, `dbpassword`).
_SENSITIVE_ENDINGS = ("password", "passwd", "secret", "token")
#: A last part that says the value is *about* a secret, not the secret itself.
_ABOUT_SUFFIXES = frozenset(
    {
        "id",
        "ids",
        "name",
        "names",
        "type",
        "kind",
        "count",
        "length",
        "len",
        "size",
        "expires",
        "expiry",
        "expiration",
        "ttl",
        "at",
        "url",
        "uri",
        "endpoint",
        "path",
        "file",
        "header",
        "hint",
        "field",
        "policy",
        "required",
        "enabled",
        "present",
        "label",
        "format",
        "algorithm",
        "alg",
        "version",
        "source",
        "env",
        "scope",
        "scopes",
        "prefix",
        "status",
        "method",
    }
)
#: Parts before `key` / `token` that make them ordinary data, not credentials.
_HARMLESS_QUALIFIERS = frozenset(
    {
        "primary",
        "foreign",
        "sort",
        "partition",
        "cache",
        "idempotency",
        "hash",
        "range",
        "composite",
        "unique",
        "lookup",
        "object",
        "dedup",
        "dedupe",
        "group",
        "routing",
        "shard",
        "row",
        "column",
        "public",
        "hot",
        "page",
        "next",
        "continuation",
        "pagination",
        "cursor",
        "sync",
        "max",
        "min",
    }
)
#: Parts that name secrets even when a harmless-looking suffix follows (`session_id`).
_ALWAYS_SECRET = frozenset({"session", "sessionid", "sessid", "phpsessid", "jsessionid", "csrf", "xsrf"})

_DIGITS = "0123456789"
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[\s_.\-/:]+")


def key_parts(key: str) -> list[str]:
    """Split a key into lowercase word parts: `xApiKey` and `x-api-key` give `['x', 'api', 'key']`."""
    return [p.lower() for chunk in _SEPARATORS.split(key) for p in _CAMEL.split(chunk) if p]


@functools.lru_cache(maxsize=4096)
def is_sensitive_key(key: str) -> bool:
    """True when a value stored under `key` should be treated as a secret."""
    parts = key_parts(key)
    if not parts:
        return False
    hits = [i for i, p in enumerate(parts) if _part_is_sensitive(p)]
    if not hits:
        return False
    if any(parts[i] in _ALWAYS_SECRET for i in hits):
        return True
    last = hits[-1]
    if last + 1 < len(parts) and parts[last + 1] in _ABOUT_SUFFIXES:
        return False
    if last > 0 and parts[last - 1] in _HARMLESS_QUALIFIERS and parts[last] in ("key", "token"):
        return False
    return True


def _part_is_sensitive(part: str) -> bool:
    part = part.rstrip(_DIGITS)
    return (
        part in _SENSITIVE_PARTS
        or part in _SENSITIVE_COMPOUNDS
        or (len(part) > 6 and part.endswith(_SENSITIVE_ENDINGS))
    )


__all__ = ["is_sensitive_key", "key_parts"]
