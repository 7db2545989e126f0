"""The audit chain's key and signed heads.

With a key (`TOOLAGENT_AUDIT_KEY` or `TOOLAGENT_AUDIT_KEY_FILE`), every row's hash is an
HMAC-SHA256 under that key, and the first row chains to a key-derived genesis value instead of
64 zeros. Someone who can write the store but does not hold the key cannot compute a valid hash
for an edited row, so editing a row and recomputing the later ones is detected. The scheme is not
stored: a chain whose first row chains to the zero genesis is unkeyed, one whose first row chains
to the key's genesis is keyed, and with a key configured an unkeyed chain fails verification (so
rewriting a keyed chain as an unkeyed one is detected too).

A writer must hold the key its chain was written with: a process started without the key (or with
another one) would append rows that `audit verify` can only report as changed, which reads as
tampering. So `AuditLog` refuses to append to a chain whose first row names another scheme
(`AuditKeyMismatch`, naming `TOOLAGENT_AUDIT_KEY`), at start and on its first append. A keyed
writer on an unkeyed chain is not refused: verify names that cause itself ("row 1 is not keyed").

What a key alone cannot show is rows dropped from the end with the head moved back to a row
that was valid. A signed head (`export-head`) kept away from the store closes that: the store must
still hold that row, at that seq, with that hash.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..settings import Settings
from ..store.audit import GENESIS_HASH

#: What a keyed chain's first row chains to is the HMAC of this text.
KEYED_GENESIS_LABEL = b"toolagent audit chain genesis v1"
#: The `scheme` a signed head names.
HEAD_SCHEME = "hmac-sha256"


def keyed_genesis(key: bytes) -> str:
    """The `prev_hash` of a keyed chain's first row."""
    return hmac.new(key, KEYED_GENESIS_LABEL, hashlib.sha256).hexdigest()


def audit_key(settings: Settings | None = None) -> bytes | None:
    """The audit key from `TOOLAGENT_AUDIT_KEY` or the file `TOOLAGENT_AUDIT_KEY_FILE` names.

    Raises:
        UsageError: both are set, the file cannot be read, or the key is empty.
    """
    s = settings if settings is not None else Settings.from_env()
    if s.audit_key and s.audit_key_file:
        raise UsageError("set TOOLAGENT_AUDIT_KEY or TOOLAGENT_AUDIT_KEY_FILE, not both")
    if s.audit_key:
        return s.audit_key.encode("utf-8")
    if s.audit_key_file:
        try:
            key = Path(s.audit_key_file).read_bytes().strip()
        except OSError as exc:
            raise UsageError(f"TOOLAGENT_AUDIT_KEY_FILE: cannot read {s.audit_key_file}: {exc.strerror}") from exc
        if not key:
            raise UsageError(f"TOOLAGENT_AUDIT_KEY_FILE: {s.audit_key_file} is empty; put the audit key in it")
        return key
    return None


class AuditKeyMismatch(UsageError):
    """This process's audit key is not the one the store's audit chain was written with."""


def key_refusal(first_prev_hash: str, key: bytes | None) -> str | None:
    """Why a writer holding `key` (None: no key) may not append to a chain whose row 1 chains to
    `first_prev_hash`, or None."""
    if key is None:
        if first_prev_hash == GENESIS_HASH:
            return None
        return (
            "the store's audit chain is keyed, but this process has no audit key: set TOOLAGENT_AUDIT_KEY "
            "(or TOOLAGENT_AUDIT_KEY_FILE) to the key the chain was written with; an unkeyed row would make "
            "`toolagent audit verify` report the chain as changed"
        )
    if first_prev_hash == GENESIS_HASH or hmac.compare_digest(first_prev_hash, keyed_genesis(key)):
        return None
    return (
        "the store's audit chain was written with another audit key: set TOOLAGENT_AUDIT_KEY "
        "(or TOOLAGENT_AUDIT_KEY_FILE) to the key the chain was written with"
    )


@dataclass(frozen=True)
class SignedHead:
    """The chain head at one moment, signed with the audit key."""

    seq: int
    hash: str
    exported_at: str
    scheme: str = HEAD_SCHEME
    signature: str = ""

    def _payload(self) -> bytes:
        body = {"seq": self.seq, "hash": self.hash, "exported_at": self.exported_at, "scheme": self.scheme}
        return json.dumps(body, sort_keys=True, separators=(",", ":")).encode("ascii")

    def signed(self, key: bytes) -> SignedHead:
        """This head with its signature under `key`."""
        sig = hmac.new(key, self._payload(), hashlib.sha256).hexdigest()
        return SignedHead(self.seq, self.hash, self.exported_at, self.scheme, sig)

    def valid(self, key: bytes) -> bool:
        """The signature was made with `key` over these exact fields."""
        return hmac.compare_digest(self.signed(key).signature, self.signature)

    def to_json(self) -> dict[str, Any]:
        """The file form."""
        return {
            "seq": self.seq,
            "hash": self.hash,
            "exported_at": self.exported_at,
            "scheme": self.scheme,
            "signature": self.signature,
        }


def sign_head(seq: int, hash_: str, key: bytes, now: datetime | None = None) -> SignedHead:
    """A signed head for `(seq, hash_)`."""
    at = (now or datetime.now(UTC)).astimezone(UTC).isoformat(timespec="microseconds")
    return SignedHead(seq, hash_, at).signed(key)


def parse_head(text: str, where: str) -> SignedHead:
    """A signed head from its JSON text.

    Raises:
        UsageError: the text is not a head file (names `where` and what is wrong).
    """
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--head: {where} is not JSON ({exc.msg})") from exc
    if not isinstance(raw, dict):
        raise UsageError(f"--head: {where} must hold a JSON object written by `toolagent audit export-head`")
    seq, hash_, at, scheme, sig = (raw.get(k) for k in ("seq", "hash", "exported_at", "scheme", "signature"))
    if not (
        isinstance(seq, int)
        and not isinstance(seq, bool)
        and seq >= 0
        and isinstance(hash_, str)
        and isinstance(at, str)
        and isinstance(scheme, str)
        and isinstance(sig, str)
    ):
        raise UsageError(
            f"--head: {where} needs seq (integer), hash, exported_at, scheme and signature; "
            "write it with `toolagent audit export-head`"
        )
    if scheme != HEAD_SCHEME:
        raise UsageError(f"--head: {where} has scheme {scheme!r}; only {HEAD_SCHEME!r} is known")
    return SignedHead(seq, hash_, at, scheme, sig)


__all__ = [
    "AuditKeyMismatch",
    "key_refusal",
    "HEAD_SCHEME",
    "KEYED_GENESIS_LABEL",
    "SignedHead",
    "audit_key",
    "keyed_genesis",
    "parse_head",
    "sign_head",
]
