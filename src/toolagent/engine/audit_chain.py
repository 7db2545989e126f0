"""The audit hash chain: how a row is hashed, the stored and exported record forms, and checking a
chain in sequence order, with or without the database.

Every row is chained to the one before it: `hash = sha256(canonical_json(fields + prev_hash))`,
where the first row's `prev_hash` is 64 zeros, `canonical_json` is `json.dumps(...,
sort_keys=True, separators=(",", ":"), ensure_ascii=True)`, datetimes are UTC ISO strings with
microseconds, and `arguments` is the redacted arguments' canonical JSON *text*. A one-row
`audit_head` table keeps the newest sequence number and hash, written in the same transaction
as the row, so `verify` detects a changed, deleted, reordered or inserted row, and rows deleted
from the end. An export line holds exactly the hashed fields plus `hash`, so an export can be
checked with `check_records` away from the database.

Unkeyed, anyone who can write the store can recompute the chain after an edit. With an audit key
(`engine.audit_key`), each hash is an HMAC-SHA256 under the key and the first row chains to a
key-derived genesis value, so an edit cannot be re-hashed without the key; a signed head exported
elsewhere (`export-head`) also catches rows dropped from the end with the head moved back.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from ..store.audit import GENESIS_HASH
from .audit_key import keyed_genesis

#: The datetime fields of a row, hashed and exported as UTC ISO strings.
TIME_FIELDS = ("recorded_at", "started_at", "ended_at")


@dataclass(frozen=True)
class AuditRecord:
    """A stored audit row."""

    seq: int
    recorded_at: datetime
    event: str
    principal: str | None
    api_key_id: str | None
    tool: str | None
    risk: str | None
    level: str | None
    decision: str | None
    reason: str | None
    arguments: Any
    outcome: str | None
    started_at: datetime | None
    ended_at: datetime | None
    duration_ms: float | None
    run_id: str | None
    execution_id: str | None
    prev_hash: str
    hash: str
    arguments_json: str | None = field(default=None, repr=False, compare=False)
    """The stored arguments text, exactly as hashed (None when not read from the database)."""

    def to_json(self) -> dict[str, Any]:
        """The export form: the hashed fields (datetimes as UTC ISO strings) plus `hash`."""
        data = asdict(self)
        data.pop("arguments_json")
        for key in TIME_FIELDS:
            data[key] = iso_utc(data[key])
        return data


@dataclass(frozen=True)
class AuditVerification:
    """The result of checking the chain."""

    ok: bool
    """True when every row and the head are consistent."""
    rows_checked: int
    """Rows read."""
    first_bad_seq: int | None = None
    """The first sequence number found wrong or missing."""
    reason: str | None = None
    """What is wrong there."""
    head_seq: int = 0
    """The chain head's sequence number (0 for an empty log)."""
    head_hash: str = GENESIS_HASH
    """The chain head's hash: pin it elsewhere to detect a rewrite of the whole log."""
    keyed: bool = False
    """The chain was checked as an HMAC chain under the audit key."""

    def to_json(self) -> dict[str, Any]:
        """CLI/API form."""
        return asdict(self)


def to_utc(value: datetime) -> datetime:
    """`value` in UTC; a naive datetime is taken to be UTC already (SQLite returns those)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def iso_utc(value: datetime | None) -> str | None:
    """`value` as an ISO string in UTC with microseconds (naive datetimes are taken as UTC)."""
    if value is None:
        return None
    # Every row written holds UTC times already: spelling them needs no conversion.
    return (value if value.tzinfo is UTC else to_utc(value)).isoformat(timespec="microseconds")


#: `json.dumps` with these options builds this encoder on every call; the spelling is the same.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)


def canonical_json(value: Any) -> str:
    """The one JSON spelling that is hashed: sorted keys, no spaces, ASCII only."""
    return _CANONICAL.encode(value)


def row_hash(fields_: Mapping[str, Any], prev_hash: str, key: bytes | None = None) -> str:
    """The hash of one row from its stored fields (`arguments` as its canonical JSON text):
    SHA-256, or HMAC-SHA256 under `key` when given."""
    payload = dict(fields_)
    payload.pop("hash", None)
    for name in TIME_FIELDS:
        value = payload.get(name)
        if isinstance(value, datetime):
            payload[name] = iso_utc(value)
    payload["prev_hash"] = prev_hash
    data = canonical_json(payload).encode("ascii")
    if key is not None:
        return hmac.new(key, data, hashlib.sha256).hexdigest()
    return hashlib.sha256(data).hexdigest()


def _hashed_fields(record: AuditRecord) -> dict[str, Any]:
    data = asdict(record)
    text = data.pop("arguments_json")
    if text is None and record.arguments is not None:
        text = canonical_json(record.arguments)
    data["arguments"] = text
    return data


class ChainChecker:
    """Checks records one at a time, in sequence order; the pure core of `verify`."""

    def __init__(self, first_prev_hash: str | None = None, first_seq: int = 1, key: bytes | None = None) -> None:
        self.key = key
        self.genesis = GENESIS_HASH if key is None else keyed_genesis(key)
        self.prev_hash = self.genesis if first_prev_hash is None else first_prev_hash
        self.next_seq = first_seq
        self.rows = 0
        self.first_bad_seq: int | None = None
        self.reason: str | None = None

    @property
    def ok(self) -> bool:
        """No problem found so far."""
        return self.first_bad_seq is None

    @property
    def last_seq(self) -> int:
        """Sequence number of the last good row (0 before the first)."""
        return self.next_seq - 1

    def fail(self, seq: int, reason: str) -> bool:
        """Note the first problem found (at row `seq`); returns False, for `return checker.fail(...)`."""
        self.first_bad_seq, self.reason = seq, reason
        return False

    def feed(self, record: AuditRecord) -> bool:
        """Check the next record; False (and stop feeding) at the first problem."""
        self.rows += 1
        seq = self.next_seq
        if record.seq < seq:
            return self.fail(record.seq, f"row {record.seq} is out of order: expected row {seq} next")
        if record.seq > seq:
            missing = f"row {seq} is" if record.seq == seq + 1 else f"rows {seq}-{record.seq - 1} are"
            return self.fail(seq, f"{missing} missing (deleted): the next row is {record.seq}")
        if seq == 1 and record.prev_hash != self.genesis:
            if self.key is not None and record.prev_hash == GENESIS_HASH:
                return self.fail(
                    1,
                    "row 1 is not keyed: the chain was written without the audit key "
                    "(or rewritten by someone without it)",
                )
            if self.key is None:
                return self.fail(
                    1,
                    "row 1 chains to a keyed genesis: set TOOLAGENT_AUDIT_KEY (or "
                    "TOOLAGENT_AUDIT_KEY_FILE) to verify a keyed chain",
                )
            return self.fail(1, "row 1 does not chain to this audit key's genesis (wrong key, or rewritten)")
        if record.prev_hash != self.prev_hash:
            return self.fail(
                seq,
                f"row {seq} does not chain to row {seq - 1}: its prev_hash does not match "
                "(an earlier row was changed or replaced)",
            )
        if not hmac.compare_digest(row_hash(_hashed_fields(record), record.prev_hash, self.key), record.hash):
            return self.fail(seq, f"row {seq} was changed: its contents do not match its hash")
        self.prev_hash = record.hash
        self.next_seq = seq + 1
        return True

    def result(self, head_seq: int, head_hash: str) -> AuditVerification:
        """The verdict, given the chain head read after the last record."""
        return AuditVerification(
            self.ok, self.rows, self.first_bad_seq, self.reason, head_seq, head_hash, self.key is not None
        )


def check_records(
    records: Iterable[Mapping[str, Any]], *, head: tuple[int, str] | None = None, key: bytes | None = None
) -> AuditVerification:
    """Check exported records (dicts as `AuditRecord.to_json` writes them) away from the database.

    An export that starts later (`--since`) is checked from its first row's `prev_hash`.

    Args:
        records: The records, in order.
        head: The `(seq, hash)` the chain must end at, if known.
        key: The audit key of a keyed chain.
    """
    checker: ChainChecker | None = None
    for n, raw in enumerate(records, 1):
        try:
            rec = _from_json(raw)
        except (TypeError, ValueError, AttributeError) as exc:
            checker = checker or ChainChecker(key=key)
            checker.rows += 1
            checker.fail(checker.next_seq, f"record {n} is not an audit record ({exc})")
            break
        if checker is None:
            checker = ChainChecker(None if rec.seq == 1 else rec.prev_hash, rec.seq, key)
        if not checker.feed(rec):
            break
    checker = checker or ChainChecker(key=key)
    last = (checker.last_seq, checker.prev_hash)
    if checker.ok and head is not None and tuple(head) != last:
        checker.fail(checker.last_seq + 1, f"the records end at row {last[0]} but the head is row {head[0]}")
    return checker.result(*(head or last))


def _from_json(raw: Mapping[str, Any]) -> AuditRecord:
    m: dict[str, Any] = dict(raw)
    for key in TIME_FIELDS:
        if m.get(key) is not None:
            m[key] = datetime.fromisoformat(m[key])
    if not isinstance(m.get("seq"), int) or not all(isinstance(m.get(k), str) for k in ("prev_hash", "hash")):
        raise ValueError("seq, prev_hash and hash are required")
    values: dict[str, Any] = {f.name: m.get(f.name) for f in fields(AuditRecord) if f.name != "arguments_json"}
    return AuditRecord(**values)


__all__ = [
    "TIME_FIELDS",
    "AuditRecord",
    "AuditVerification",
    "ChainChecker",
    "canonical_json",
    "check_records",
    "iso_utc",
    "row_hash",
    "to_utc",
]
