"""The tamper-evident audit log: who ran which tool, what was decided, and how it ended.

`AuditEntry` is what the engine appends; `AuditLog` appends entries to one store's chain and
verifies, queries and exports it. How a row is hashed and how a chain is checked (also away from
the database, for an export) is `engine.audit_chain`'s business. Appends never fork the chain
(`store/audit.py` holds the rows and says how).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Literal

import anyio

from ..model.redaction import redact, redact_text
from ..model.status import AuditOutcome
from ..store.audit import GENESIS_HASH, AuditRows
from ..store.db import Connection, Database, utcnow
from .audit_chain import (
    TIME_FIELDS,
    AuditRecord,
    AuditVerification,
    ChainChecker,
    canonical_json,
    iso_utc,
    row_hash,
    to_utc,
)
from .audit_key import AuditKeyMismatch, audit_key, key_refusal, keyed_genesis

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
    spelled_arguments: str | None = field(default=None, compare=False, repr=False)
    """`arguments` as `spell_arguments` spells them, when the caller has them already (one call's
    rows share the text); `arguments` is then not read again."""

    def __post_init__(self) -> None:
        if self.decision is not None and self.decision not in DECISIONS:
            raise ValueError(f"audit decision must be one of {sorted(DECISIONS)}, not {self.decision!r}")
        if self.outcome is not None and self.outcome not in OUTCOMES:
            raise ValueError(f"audit outcome must be one of {sorted(OUTCOMES)}, not {self.outcome!r}")
        if not self.event:
            raise ValueError("audit event must not be empty")


_ENTRY_FIELDS = tuple(f.name for f in fields(AuditEntry))
_TEXT_FIELDS = (
    "principal",
    "api_key_id",
    "tool",
    "risk",
    "level",
    "decision",
    "reason",
    "outcome",
    "run_id",
    "execution_id",
    "event",
)


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
    if value.isascii():  # no surrogate to replace: only NUL can need it
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    return value.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")


def spell_arguments(arguments: Any, *, redacted: bool = False) -> str | None:
    """Tool arguments as an audit row stores and hashes them: redacted (unless `redacted` says
    `redact` made them), made JSON-native, and spelled as canonical JSON."""
    if arguments is None:
        return None
    return canonical_json(_jsonable(arguments if redacted else redact(arguments)))


def _stored_fields(entry: AuditEntry) -> dict[str, Any]:
    values: dict[str, Any] = {name: getattr(entry, name) for name in _ENTRY_FIELDS}
    for key in _TEXT_FIELDS:
        value = values[key]
        if value is not None:
            values[key] = _clean_text(value if type(value) is str else str(value))
    if values["reason"] is not None:
        values["reason"] = redact_text(values["reason"])
    spelled = values.pop("spelled_arguments")
    values["arguments"] = spelled if spelled is not None else spell_arguments(entry.arguments)
    for key in ("started_at", "ended_at"):
        if values[key] is not None:
            values[key] = to_utc(values[key])
    if values["duration_ms"] is not None:
        values["duration_ms"] = float(values["duration_ms"])
    return values


def _record(row: Any) -> AuditRecord:
    m: dict[str, Any] = dict(row._mapping)
    for key in TIME_FIELDS:
        if m[key] is not None:
            m[key] = to_utc(m[key])
    m["arguments_json"] = m["arguments"]
    m["arguments"] = None if m["arguments"] is None else json.loads(m["arguments"])
    return AuditRecord(**m)


class AuditLog:
    """Append, verify, query and export the audit log of one store.

    `key` is the audit key (HMAC chain); by default it is read from the settings, and None means
    the unkeyed SHA-256 chain.
    """

    def __init__(self, db: Database, key: bytes | None | Literal["settings"] = "settings") -> None:
        self.db = db
        self.rows = AuditRows(db)
        self.key: bytes | None = audit_key() if key == "settings" else key
        self._genesis = GENESIS_HASH if self.key is None else keyed_genesis(self.key)
        self._key_checked = False
        """The chain's first row was found written under this process's key (or its absence)."""

    def _check_key_in(self, conn: Connection) -> None:
        """Refuse a chain written under another key (or none); once a row shows it is ours, never again.

        Raises:
            AuditKeyMismatch: row 1 chains to another scheme's genesis (`engine.audit_key`).
        """
        if self._key_checked:
            return
        first = AuditRows.first_in(conn)
        if first is None:
            return
        seq, prev_hash = first
        refusal = key_refusal(prev_hash, self.key) if seq == 1 else None
        if refusal is not None:
            raise AuditKeyMismatch(refusal)
        self._key_checked = True

    async def check_key(self) -> None:
        """Refuse, before anything is written, a store whose audit chain another key wrote.

        Raises:
            AuditKeyMismatch: this process's audit key (or its absence) is not the chain's.
        """
        async with self.db.begin() as conn:
            await conn.run_sync(self._check_key_in)

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
        seq = self.rows.append_in(
            conn, _stored_fields(entry), utcnow(), lambda f, prev: row_hash(f, prev, key), genesis=self._genesis
        )
        # Checked after the append, under the chain's lock: a first row another writer just made
        # is seen, and a refusal rolls the append back with the caller's transaction.
        self._check_key_in(conn)
        return seq

    def append_many_in(self, conn: Connection, entries: Sequence[AuditEntry]) -> list[int]:
        """Append `entries` in order inside the caller's transaction, moving the chain head once."""
        key = self.key
        seqs = self.rows.append_many_in(
            conn,
            [_stored_fields(e) for e in entries],
            utcnow(),
            lambda f, prev: row_hash(f, prev, key),
            genesis=self._genesis,
        )
        if seqs:
            self._check_key_in(conn)
        return seqs

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
                    checker.fail(last, f"row {last} does not match the chain head (it was replaced)")
                return checker.result(head_seq, head_hash)
            if head is None:
                checker.fail(1, f"the chain head is missing but {last} rows exist")
                return checker.result(head_seq, head_hash)
            if head_seq < last:
                checker.fail(head_seq + 1, f"rows {head_seq + 1}-{last} are beyond the chain head (inserted)")
                return checker.result(head_seq, head_hash)
            if not await self._batch(after):
                gone = f"row {head_seq} is" if head_seq == last + 1 else f"rows {last + 1}-{head_seq} are"
                checker.fail(
                    last + 1,
                    f"{gone} missing: the log ends at row {last} but the chain head "
                    f"is row {head_seq} (deleted from the end)",
                )
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
        filters = {
            "principal": principal,
            "tool": tool,
            "execution_id": execution_id,
            "run_id": run_id,
            "event": event,
            "decision": decision,
        }
        rows = await self.rows.find(
            filters, since=to_utc(since) if since is not None else None, limit=limit, newest_first=newest_first
        )
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


__all__ = ["AuditEntry", "AuditLog", "Decision", "Outcome", "spell_arguments"]
