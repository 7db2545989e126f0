"""Secret masking for audit rows, logs and anything else that leaves the process.

Two independent checks, both conservative about what they leave alone:

- **By key.** A mapping value is replaced whole when its key names a secret. Keys are split into
  word parts (`_`, `-`, `.`, spaces and camelCase), so `api_key`, `apiKey`, `X-Api-Key` and `key`
  match while `keyword`, `monkey` and `max_tokens` do not. Keys that name *about* a secret
  (`key_id`, `token_type`, `password_file`) and well-known non-secret keys (`primary_key`,
  `public_key`, `page_token`) are left alone.
- **By shape.** Every string is scanned for JWTs, `Bearer` credentials, vendor API keys, PEM
  private keys, passwords in connection URLs, `password=...` style pairs and long high-entropy
  hex or base64 runs; only the matched part is replaced, so the rest of a message stays readable.

`None` and booleans are never replaced: they cannot carry a secret and masking them would only
hide useful facts (`{"token": null}` says no token was sent).

- **By value.** A secret found by key in a run's payload, metadata, overrides or a call's
  arguments (`{"password": "hunter2"}`) is remembered for the rest of that task and the tasks it
  starts (`remember_secrets`), and every later `redact` / `redact_text` masks that exact value
  wherever it appears: a tool result that echoes it, the step params a template rendered from it,
  the deliverable, a log line. The run itself still uses the real value; only what is stored,
  logged or shown is masked.

`redact_values` is what the store's write verbs call on a row before it is written.

Masking is idempotent: text or data masked once comes out of a second pass unchanged, so a value
masked by the recorder and again by the store stays `password=[REDACTED]`.
"""

from __future__ import annotations

import copy
import functools
import math
import re
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from contextvars import ContextVar
from typing import Any

from .secret_keys import is_sensitive_key, key_parts

#: What replaces a secret.
REDACTED = "[REDACTED]"

# --- shapes ------------------------------------------------------------------------------------

_B64URL = r"[A-Za-z0-9_-]"
_PEM = re.compile(r"-----BEGIN (?P<kind>[A-Z0-9 ]*PRIVATE KEY)-----.*?(?:-----END (?P=kind)-----|\Z)", re.DOTALL)
# Token-like matches start only where a token cannot continue, so a long run is scanned once.
_START = r"(?<![A-Za-z0-9_\-])"
_JWT = re.compile(rf"{_START}eyJ{_B64URL}{{6,}}\.{_B64URL}{{6,}}\.{_B64URL}*")
# Greedy up to the last `@` of the authority, so a password holding a raw `@` is masked whole.
_URL_PASSWORD = re.compile(
    r"(?P<head>(?<![a-zA-Z0-9+.\-])[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@?#]*:)(?P<secret>[^\s/?#]+)(?=@)"
)
_AUTH_HEADER = re.compile(
    r"(?P<head>\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:(?:basic|bearer|digest|token|negotiate|ntlm|apikey)\s+)?)"
    r"(?P<secret>[^\s\"',;]+)",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<head>\bbearer\s+)(?P<secret>[A-Za-z0-9._~+/=\-]{8,})", re.IGNORECASE)
_VENDOR_KEYS = re.compile(
    _START
    + "(?:"
    + "|".join(
        (
            r"\bsk-[A-Za-z0-9_\-]{20,}",  # OpenAI, Anthropic (sk-ant-...), DeepSeek
            r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}",  # Stripe secret and restricted keys
            r"\bwhsec_[A-Za-z0-9]{20,}",  # Stripe webhook secrets
            r"\bgh[pousr]_[A-Za-z0-9]{30,}",  # GitHub tokens
            r"\bgithub_pat_[A-Za-z0-9_]{20,}",
            r"\bglpat-[A-Za-z0-9_\-]{20,}",  # GitLab
            r"\bxox[abprse]-[A-Za-z0-9\-]{10,}",  # Slack
            r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key ids
            r"\bAIza[0-9A-Za-z_\-]{35}",  # Google API keys
            r"\bnpm_[A-Za-z0-9]{36}\b",
            r"\bhf_[A-Za-z0-9]{30,}",  # Hugging Face
            r"\bta_[A-Za-z0-9_\-]{20,}",  # toolagent's own API keys
        )
    )
    + ")"
)
# `password=...`, `"api_key": "..."`, `X-Api-Key: ...`: the key is judged by `is_sensitive_key`, and
# only then is its value matched, so a harmless pair (`https://...`) never swallows a later one
# (`?token=...`). Keys start only where a key cannot continue, which keeps the scan linear.
_PAIR = re.compile(r"(?<![A-Za-z0-9_.\-])(?P<key>[A-Za-z][A-Za-z0-9_.\-]*)(?P<sep>[\"']?\s*[:=]\s*(?P<quote>[\"'])?)")
_QUOTED_VALUE = re.compile(r"[^\"'\n]+")
_BARE_VALUE = re.compile(r"[^\s\"'&,;}\]]+")
_CANDIDATE = re.compile(r"(?<![A-Za-z0-9+/=_\-])[A-Za-z0-9+/_\-]{32,}={0,2}(?![A-Za-z0-9+/=_\-])")
_HEX = re.compile(r"[0-9a-fA-F]+")
#: Bits per character above which a mixed-case alphanumeric run is taken for random key material.
_ENTROPY_BITS = 4.0
_WORDS = re.compile(r"[a-z]{4,}|[A-Z]{4,}|[A-Z][a-z]{3,}")
_MAX_WORDINESS = 0.55
#: Shortest run the entropy check looks at.
MIN_SECRET_RUN = 32


def _entropy(s: str) -> float:
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def _wordiness(s: str) -> float:
    # Share of characters inside word-like letter runs: about 0.2 for random base64, above 0.7
    # for identifiers such as `getUserAccountSettingsByOrganizationId42`.
    return sum(map(len, _WORDS.findall(s))) / len(s)


def looks_random(s: str) -> bool:
    """True for a 32+ character hex or base64 run that looks like key material, not a word or path."""
    body = s.rstrip("=")
    if len(body) < MIN_SECRET_RUN:
        return False
    if _HEX.fullmatch(body):
        # Hex keys and digests look alike; a 32+ digit hex run in a payload is treated as a secret.
        return len(set(body.lower())) >= 8 and not body.isdigit() and any(c.isdigit() for c in body)
    if body.count("/") > len(body) // 10 or "//" in body:
        return False  # a path, not base64
    classes = sum((any(c.islower() for c in body), any(c.isupper() for c in body), any(c.isdigit() for c in body)))
    return classes == 3 and _entropy(body) >= _ENTROPY_BITS and _wordiness(body) < _MAX_WORDINESS


def _sub_group(pattern: re.Pattern[str], text: str) -> str:
    def keep_head(m: re.Match[str]) -> str:
        return m.group(0)[: m.start("secret") - m.start(0)] + REDACTED

    return pattern.sub(keep_head, text)


# Values a sensitive key may hold that are not secrets; an auth scheme is followed by the
# credential, which `_AUTH_HEADER` and `_BEARER` have masked already.
_LITERALS = frozenset(
    {
        "null",
        "none",
        "true",
        "false",
        "[redacted]",
        "basic",
        "bearer",
        "digest",
        "token",
        "negotiate",
        "ntlm",
    }
)


def _sub_pairs(text: str) -> str:
    out: list[str] = []
    pos = 0
    while (m := _PAIR.search(text, pos)) is not None:
        out.append(text[pos : m.end()])
        pos = m.end()
        # A value masked already is left whole: the bare-value rule stops at `]`, and masking
        # `[REDACTED` again would leave `[REDACTED]]` (masking is idempotent).
        if text.startswith(REDACTED, pos) or not is_sensitive_key(m.group("key")):
            continue
        value = (_QUOTED_VALUE if m.group("quote") else _BARE_VALUE).match(text, pos)
        if value is None:
            continue
        words = value.group().split(maxsplit=1)
        if not words or (words[0].lower() in _LITERALS and (len(words) == 1 or words[1] == REDACTED)):
            continue
        out.append(REDACTED)
        pos = value.end()
    out.append(text[pos:])
    return "".join(out)


def _sub_bearer(m: re.Match[str]) -> str:
    # "the bearer instrument" is prose: a credential has a digit or punctuation, or is long.
    secret = m.group("secret")
    if len(secret) >= 20 or any(c.isdigit() or c in "._~+/=-" for c in secret):
        return m.group("head") + REDACTED
    return m.group(0)


def _sub_random(m: re.Match[str]) -> str:
    return REDACTED if looks_random(m.group(0)) else m.group(0)


_STEPS: tuple[Callable[[str], str], ...] = (
    lambda s: _PEM.sub(REDACTED, s),
    lambda s: _JWT.sub(REDACTED, s),
    lambda s: _sub_group(_URL_PASSWORD, s),
    lambda s: _sub_group(_AUTH_HEADER, s),
    lambda s: _BEARER.sub(_sub_bearer, s),
    lambda s: _VENDOR_KEYS.sub(REDACTED, s),
    _sub_pairs,
    lambda s: _CANDIDATE.sub(_sub_random, s),
)


# Something every shape rule needs in order to match (a `:` or `=` for pairs, URLs and headers, a
# vendor prefix, `eyJ`, a PEM header, `bearer`, a 32-character run): text with none of them is
# left as it is after one scan instead of eight.
_MAYBE_SECRET = re.compile(
    r"[:=]|-----BEGIN|eyJ|(?i:bearer)|sk-|[sr]k_|whsec_|gh[pousr]_|github_pat_|glpat-|xox[abprse]-|AKIA|ASIA|AIza"
    r"|npm_|hf_|ta_|[A-Za-z0-9+/_\-]{32}"
)
#: Texts up to this long have their shape-rule result cached (statuses, names and argument values
#: recur on every call of a tool).
_CACHED_TEXT_CHARS = 256


@functools.lru_cache(maxsize=8192)
def _redact_short(text: str) -> str:
    return _redact_shapes(text)


def _redact_shapes(text: str) -> str:
    if _MAYBE_SECRET.search(text) is None:
        return text
    for step in _STEPS:
        text = step(text)
    return text


def redact_text(text: str) -> str:
    """Replace every secret-shaped part of `text` (a log line, an error message, a URL), and every
    remembered secret value, by `[REDACTED]`."""
    if not text:
        return text
    text = _redact_short(text) if len(text) <= _CACHED_TEXT_CHARS else _redact_shapes(text)
    return redact_known(text)


def redact_known(text: str) -> str:
    """Replace only the remembered secret values in `text` (see `remember_secrets`): for text
    rendered from data that `redact` already went through, where the shape rules would only
    mangle what the data deliberately kept (base64 media)."""
    for secret in _KNOWN.get():
        if secret in text:
            if secret in REDACTED:
                # A secret spelled inside the mask (`DACT`) is replaced only between masks, so
                # neither an earlier mask nor this one is broken.
                text = REDACTED.join(part.replace(secret, REDACTED) for part in text.split(REDACTED))
            else:
                text = text.replace(secret, REDACTED)
    return text


#: Shortest value remembered as a secret: shorter ones (`1`, `yes`) would mask ordinary text.
MIN_KNOWN_SECRET = 4
#: Secret values seen by key in this task's inputs, longest first (so a longer one is masked whole).
_KNOWN: ContextVar[tuple[str, ...]] = ContextVar("toolagent_known_secrets", default=())


def secret_values(*objs: Any) -> set[str]:
    """The strings held under sensitive keys anywhere in `objs` (a whole nested value counts)."""
    found: set[str] = set()
    stack: list[tuple[Any, bool]] = [(o, False) for o in objs]
    seen = 0
    while stack and seen < 100_000:
        item, secret = stack.pop()
        seen += 1
        kind = type(item)  # exact types first, as in `_redact`: an ABC check costs several times more
        if kind in _SCALARS:
            continue
        if kind is str or isinstance(item, str):
            if secret and len(item) >= MIN_KNOWN_SECRET and item != REDACTED:
                found.add(item)
        elif kind is dict or isinstance(item, Mapping):
            stack.extend((v, secret or (isinstance(k, str) and is_sensitive_key(k))) for k, v in item.items())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend((v, secret) for v in item)
    return found


def remember_secrets(*objs: Any) -> None:
    """Remember the secret values of `objs` (see `secret_values`) for this task and the tasks and
    threads it starts from now on, so that `redact` masks them wherever they reappear."""
    found = secret_values(*objs)
    if found - set(_KNOWN.get()):
        _KNOWN.set(tuple(sorted(found | set(_KNOWN.get()), key=len, reverse=True)))


def redact_values(
    values: Mapping[str, Any], *, data: Collection[str] = (), text: Collection[str] = ()
) -> dict[str, Any]:
    """A row's column values as they may be stored: the `data` columns (JSON) through `redact`,
    the `text` columns through `redact_text`, the others unchanged."""
    out = dict(values)
    for name in data:
        if out.get(name) is not None:
            out[name] = redact(out[name])
    for name in text:
        if isinstance(out.get(name), str):
            out[name] = redact_text(out[name])
    return out


def redact(obj: Any) -> Any:
    """A deep copy of `obj` with secrets replaced by `"[REDACTED]"`.

    Mappings become dicts, lists and tuples keep their type; values under a sensitive key are
    replaced whole (unless `None` or a bool), and every string anywhere is passed through
    `redact_text`. Bytes of 32 or more are replaced whole (they cannot be read as text);
    objects of other types are deep-copied unchanged.

    Args:
        obj: JSON-like data: tool arguments, results, headers, config.

    Returns:
        The redacted copy; `obj` itself is not modified.
    """
    return _redact(obj, 0)


#: Nesting deeper than this is cut off rather than recursed into.
MAX_DEPTH = 64
#: Keys of an MCP content block that hold its base64 payload (`image`/`audio` data, resource blobs).
_MEDIA_KEYS = frozenset({"data", "blob"})


def _is_media_block(obj: Mapping[Any, Any]) -> bool:
    """An MCP content block carrying binary media: its base64 payload is random-looking by nature,
    so the shape rule would destroy an image while protecting nothing. Text-like types
    (`text/*`, JSON, XML) are still scanned."""
    mime = obj.get("mimeType", obj.get("mime_type"))
    if not isinstance(mime, str):
        return False
    mime = mime.lower()
    return not (mime.startswith("text/") or "json" in mime or "xml" in mime or "yaml" in mime)


_SCALARS = frozenset({bool, int, float, type(None)})


def _redact(obj: Any, depth: int) -> Any:
    # Exact-type checks first: JSON data is made of plain dicts, lists and scalars, and an ABC
    # `isinstance` costs several times as much (this runs for every node of every stored row).
    if depth > MAX_DEPTH:
        return REDACTED
    kind = type(obj)
    if kind is str:
        return redact_text(obj) if obj else obj
    if kind in _SCALARS:
        return obj
    if kind is dict or isinstance(obj, Mapping):
        media = _is_media_block(obj)
        out: dict[Any, Any] = {}
        for k, v in obj.items():
            if type(k) is str and is_sensitive_key(k) and v is not None and type(v) is not bool:
                out[k] = REDACTED
            elif media and k in _MEDIA_KEYS and type(v) is str:
                out[k] = v
            else:
                out[k] = _redact(v, depth + 1)
        return out
    if kind is list:
        return [_redact(v, depth + 1) for v in obj]
    if isinstance(obj, str):
        return redact_text(obj)
    if obj is None or isinstance(obj, (bool, int, float)):
        return obj
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = [_redact(v, depth + 1) for v in obj]
        if isinstance(obj, list):
            return items
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):
            return type(obj)(*items)  # a namedtuple
        try:
            return type(obj)(items)
        except TypeError:
            return items
    if isinstance(obj, (bytes, bytearray)):
        return REDACTED if len(obj) >= MIN_SECRET_RUN else bytes(obj)
    try:
        return copy.deepcopy(obj)
    except Exception:  # noqa: BLE001 - an uncopyable object is passed through as-is
        return obj


__all__ = [
    "MAX_DEPTH",
    "MIN_KNOWN_SECRET",
    "MIN_SECRET_RUN",
    "REDACTED",
    "is_sensitive_key",
    "key_parts",
    "looks_random",
    "redact",
    "redact_text",
    "redact_values",
    "remember_secrets",
    "secret_values",
]
