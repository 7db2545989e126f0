"""The tamper-evident audit log: who ran which tool, what was decided, and how it ended.

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

Appends never fork the chain (`store/audit.py` holds the rows and says how).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Literal

import anyio

from ..status import AuditOutcome
from ..store.audit import AUDIT_LOCK_KEY, GENESIS_HASH, AuditChainBroken, AuditRows
from ..store.db import Connection, Database, utcnow
from .audit_key import audit_key, keyed_genesis
from .redaction import redact, redact_text

#: Rows read per query by `verify`, `export` and `iter_records`.
BATCH_ROWS = 1000

Decision = Literal["allow", "deny"]
Outcome = AuditOutcome
DECISIONS = frozenset({"allow", "deny"})
OUTCOMES = frozenset(AuditOutcome)


@dataclass(frozen=True)
class AuditEntry:
    """What the engine records about one decision or one outcome.

    Arguments are redacted again on append, so a caller that forgets cannot store a secret.
    """

    principal: str | None = None
    """User id or name the decision was made for."""
    api_key_id: str | None = None
    """Id of the API key used, if any (never the key itself)."""
    tool: str | None = None
    """Qualified tool name."""
    risk: str | None = None
    """The tool's risk category: `safe`, `moderate`, `dangerous`."""
    level: str | None = None
    """The caller's permission level: `view_only`, `execute_basic`, `execute_advanced`, `admin`."""
    decision: Decision | None = None
    """`allow` or `deny`."""
    reason: str | None = None
    """Why: the denial reason or the error message (secrets are masked on append)."""
    arguments: Any = None
    """The tool arguments (redacted on append)."""
    outcome: Outcome | None = None
    """`success`, `failed`, `cancelled`, `denied`; `None` for a decision not yet carried out."""
    started_at: datetime | None = None
    """When the execution started."""
    ended_at: datetime | None = None
    """When the execution ended."""
    duration_ms: float | None = None
    """Execution time in milliseconds."""
    run_id: str | None = None
    """The BUILD run the execution belongs to, if any."""
    execution_id: str | None = None
    """The execution this row is about."""
    event: str = "decision"
    """What the row records: `decision` (the gate) or `outcome` (the end of the execution)."""

    def __post_init__(self) -> None:
        if self.decision is not None and self.decision not in DECISIONS:
            raise ValueError(f"audit decision must be one of {sorted(DECISIONS)}, not {self.decision!r}")
        if self.outcome is not None and self.outcome not in OUTCOMES:
            raise ValueError(f"audit outcome must be one of {sorted(OUTCOMES)}, not {self.outcome!r}")
        if not self.event:
            raise ValueError("audit event must not be empty")


_ENTRY_FIELDS = tuple(f.name for f in fields(AuditEntry))
_TEXT_FIELDS = ("principal", "api_key_id", "tool", "risk", "level", "decision", "reason", "outcome", "run_id",
                "execution_id", "event")
_TIME_FIELDS = ("recorded_at", "started_at", "ended_at")


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
        for key in _TIME_FIELDS:
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
    return None if value is None else to_utc(value).isoformat(timespec="microseconds")


def canonical_json(value: Any) -> str:
    """The one JSON spelling that is hashed: sorted keys, no spaces, ASCII only."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)


def row_hash(fields_: Mapping[str, Any], prev_hash: str, key: bytes | None = None) -> str:
    """The hash of one row from its stored fields (`arguments` as its canonical JSON text):
    SHA-256, or HMAC-SHA256 under `key` when given."""
    payload = {k: v for k, v in fields_.items() if k not in ("hash", "prev_hash")}
    for name in _TIME_FIELDS:
        if isinstance(payload.get(name), datetime):
            payload[name] = iso_utc(payload[name])
    payload["prev_hash"] = prev_hash
    data = canonical_json(payload).encode("ascii")
    if key is not None:
        return hmac.new(key, data, hashlib.sha256).hexdigest()
    return hashlib.sha256(data).hexdigest()


def _jsonable(value: Any) -> Any:
    # JSON-native data only, so the stored text parses back to data that re-encodes identically:
    # keys become strings, tuples and sets lists (sets in a stable order), anything else a string.
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_jsonable(v) for v in value), key=repr)
    if isinstance(value, datetime):
        return iso_utc(value)
    return str(value)


def _clean_text(value: str | None) -> str | None:
    # PostgreSQL text cannot hold NUL or lone surrogates; store what can be stored, the same on both.
    if value is None:
        return None
    return value.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")


def _stored_fields(entry: AuditEntry) -> dict[str, Any]:
    values: dict[str, Any] = {name: getattr(entry, name) for name in _ENTRY_FIELDS}
    for key in _TEXT_FIELDS:
        if values[key] is not None:
            values[key] = _clean_text(str(values[key]))
    if values["reason"] is not None:
        values["reason"] = redact_text(values["reason"])
    values["arguments"] = None if entry.arguments is None else canonical_json(_jsonable(redact(entry.arguments)))
    for key in ("started_at", "ended_at"):
        if values[key] is not None:
            values[key] = to_utc(values[key])
    if values["duration_ms"] is not None:
        values["duration_ms"] = float(values["duration_ms"])
    return values


def _record(row: Any) -> AuditRecord:
    m: dict[str, Any] = dict(row._mapping)
    for key in _TIME_FIELDS:
        if m[key] is not None:
            m[key] = to_utc(m[key])
    m["arguments_json"] = m["arguments"]
    m["arguments"] = None if m["arguments"] is None else json.loads(m["arguments"])
    return AuditRecord(**m)


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

    def _bad(self, seq: int, reason: str) -> bool:
        self.first_bad_seq, self.reason = seq, reason
        return False

    def feed(self, record: AuditRecord) -> bool:
        """Check the next record; False (and stop feeding) at the first problem."""
        self.rows += 1
        seq = self.next_seq
        if record.seq < seq:
            return self._bad(record.seq, f"row {record.seq} is out of order: expected row {seq} next")
        if record.seq > seq:
            missing = f"row {seq} is" if record.seq == seq + 1 else f"rows {seq}-{record.seq - 1} are"
            return self._bad(seq, f"{missing} missing (deleted): the next row is {record.seq}")
        if seq == 1 and record.prev_hash != self.genesis:
            if self.key is not None and record.prev_hash == GENESIS_HASH:
                return self._bad(1, "row 1 is not keyed: the chain was written without the audit key "
                                    "(or rewritten by someone without it)")
            if self.key is None:
                return self._bad(1, "row 1 chains to a keyed genesis: set TOOLAGENT_AUDIT_KEY (or "
                                    "TOOLAGENT_AUDIT_KEY_FILE) to verify a keyed chain")
            return self._bad(1, "row 1 does not chain to this audit key's genesis (wrong key, or rewritten)")
        if record.prev_hash != self.prev_hash:
            return self._bad(seq, f"row {seq} does not chain to row {seq - 1}: its prev_hash does not match "
                                  "(an earlier row was changed or replaced)")
        if not hmac.compare_digest(row_hash(_hashed_fields(record), record.prev_hash, self.key), record.hash):
            return self._bad(seq, f"row {seq} was changed: its contents do not match its hash")
        self.prev_hash = record.hash
        self.next_seq = seq + 1
        return True

    def result(self, head_seq: int, head_hash: str) -> AuditVerification:
        """The verdict, given the chain head read after the last record."""
        return AuditVerification(self.ok, self.rows, self.first_bad_seq, self.reason, head_seq, head_hash,
                                 self.key is not None)


def check_records(records: Iterable[Mapping[str, Any]], *, head: tuple[int, str] | None = None,
                  key: bytes | None = None) -> AuditVerification:
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
            checker._bad(checker.next_seq, f"record {n} is not an audit record ({exc})")
            break
        if checker is None:
            checker = ChainChecker(None if rec.seq == 1 else rec.prev_hash, rec.seq, key)
        if not checker.feed(rec):
            break
    checker = checker or ChainChecker(key=key)
    last = (checker.last_seq, checker.prev_hash)
    if checker.ok and head is not None and tuple(head) != last:
        checker._bad(checker.last_seq + 1, f"the records end at row {last[0]} but the head is row {head[0]}")
    return checker.result(*(head or last))


def _from_json(raw: Mapping[str, Any]) -> AuditRecord:
    m: dict[str, Any] = dict(raw)
    for key in _TIME_FIELDS:
        if m.get(key) is not None:
            m[key] = datetime.fromisoformat(m[key])
    if not isinstance(m.get("seq"), int) or not all(isinstance(m.get(k), str) for k in ("prev_hash", "hash")):
        raise ValueError("seq, prev_hash and hash are required")
    values: dict[str, Any] = {f.name: m.get(f.name) for f in fields(AuditRecord) if f.name != "arguments_json"}
    return AuditRecord(**values)


class AuditLog:
    """Append, verify, query and export the audit log of one store.

    `key` is the audit key (HMAC chain); by default it is read from the settings, and None means
    the unkeyed SHA-256 chain.
    """

    def __init__(self, db: Database, key: bytes | None | Literal["settings"] = "settings") -> None:
        self.db = db
        self.rows = AuditRows(db)
        self.key: bytes | None = audit_key() if key == "settings" else key  # type: ignore[assignment]
        self._genesis = GENESIS_HASH if self.key is None else keyed_genesis(self.key)

    async def append(self, entry: AuditEntry) -> int:
        """Record `entry` at the end of the chain and return its sequence number.

        Raises:
            AuditChainBroken: Rows exist but the chain head is gone (the log was tampered with).
            StoreError: The database failed.
        """
        return await self.db.write(self.append_in, entry)

    def append_in(self, conn: Connection, entry: AuditEntry) -> int:
        """`append` inside the caller's transaction: the entry commits or rolls back with it."""
        key = self.key
        return self.rows.append_in(conn, _stored_fields(entry), utcnow(),
                                   lambda f, prev: row_hash(f, prev, key), genesis=self._genesis)

    def append_many_in(self, conn: Connection, entries: Sequence[AuditEntry]) -> list[int]:
        """Append `entries` in order inside the caller's transaction, moving the chain head once."""
        key = self.key
        return self.rows.append_many_in(conn, [_stored_fields(e) for e in entries], utcnow(),
                                        lambda f, prev: row_hash(f, prev, key), genesis=self._genesis)

    async def head(self) -> tuple[int, str] | None:
        """The newest `(seq, hash)`, or None for an empty log."""
        return await self.rows.head()

    async def hash_at(self, seq: int) -> str | None:
        """The stored hash of row `seq`, or None when there is no such row."""
        rows = await self.rows.batch(seq - 1, 1)
        return str(rows[0].hash) if rows and int(rows[0].seq) == seq else None

    async def _batch(self, after_seq: int, since: datetime | None = None) -> list[AuditRecord]:
        rows = await self.rows.batch(after_seq, BATCH_ROWS, to_utc(since) if since is not None else None)
        return [_record(r) for r in rows]

    async def iter_records(self, *, since: datetime | None = None) -> AsyncIterator[AuditRecord]:
        """Every record in sequence order (recorded at or after `since`), read in batches."""
        after = 0
        while batch := await self._batch(after, since):
            for rec in batch:
                yield rec
            after = batch[-1].seq

    async def verify(self) -> AuditVerification:
        """Check every row's hash and link, and that the chain ends at the head.

        Appends may go on while this runs: rows are read until none are left, then the head;
        a row commits together with its head update, so a head ahead of the last row read means
        either new rows (read them and check again) or rows deleted from the end.
        """
        checker = ChainChecker(key=self.key)
        after = 0
        while True:
            while batch := await self._batch(after):
                for rec in batch:
                    if not checker.feed(rec):
                        return checker.result(*(await self.head() or (0, self._genesis)))
                after = batch[-1].seq
            head = await self.head()
            head_seq, head_hash = head or (0, self._genesis)
            last = checker.last_seq
            if head_seq == last:
                if head_hash != checker.prev_hash:
                    checker._bad(last, f"row {last} does not match the chain head (it was replaced)")
                return checker.result(head_seq, head_hash)
            if head is None:
                checker._bad(1, f"the chain head is missing but {last} rows exist")
                return checker.result(head_seq, head_hash)
            if head_seq < last:
                checker._bad(head_seq + 1, f"rows {head_seq + 1}-{last} are beyond the chain head (inserted)")
                return checker.result(head_seq, head_hash)
            if not await self._batch(after):
                gone = f"row {head_seq} is" if head_seq == last + 1 else f"rows {last + 1}-{head_seq} are"
                checker._bad(last + 1, f"{gone} missing: the log ends at row {last} but the chain head "
                                       f"is row {head_seq} (deleted from the end)")
                return checker.result(head_seq, head_hash)

    async def query(
        self,
        *,
        principal: str | None = None,
        tool: str | None = None,
        execution_id: str | None = None,
        run_id: str | None = None,
        event: str | None = None,
        decision: str | None = None,
        since: datetime | None = None,
        limit: int = 100,
        newest_first: bool = False,
    ) -> list[AuditRecord]:
        """Records matching every given filter, oldest first (or newest first), at most `limit`."""
        filters = {"principal": principal, "tool": tool, "execution_id": execution_id, "run_id": run_id,
                   "event": event, "decision": decision}
        rows = await self.rows.find(filters, since=to_utc(since) if since is not None else None, limit=limit,
                                    newest_first=newest_first)
        return [_record(r) for r in rows]

    async def export(self, fp_or_path: IO[str] | str | Path, since: datetime | None = None) -> int:
        """Write records as JSON lines (`AuditRecord.to_json`) to an open text file or a path.

        Returns:
            The number of lines written.
        """
        if isinstance(fp_or_path, (str, Path)):
            async with await anyio.open_file(fp_or_path, "w", encoding="utf-8") as f:
                return await self._export(f.write, since)

        fp = fp_or_path

        async def write(text: str) -> None:
            fp.write(text)

        return await self._export(write, since)

    async def _export(self, write: Any, since: datetime | None) -> int:
        count = 0
        lines: list[str] = []
        async for rec in self.iter_records(since=since):
            lines.append(json.dumps(rec.to_json(), ensure_ascii=False) + "\n")
            count += 1
            if len(lines) >= BATCH_ROWS:
                await write("".join(lines))
                lines.clear()
        if lines:
            await write("".join(lines))
        return count


__all__ = [
    "AUDIT_LOCK_KEY", "GENESIS_HASH", "AuditChainBroken", "AuditEntry", "AuditLog", "AuditRecord", "AuditVerification",
    "ChainChecker", "Decision", "Outcome", "canonical_json", "check_records", "iso_utc", "row_hash", "to_utc",
]
