"""The audit log's rows (`audit_log`, `audit_head`): appending to the hash chain, and reading it.

Appends never fork the chain (a batch of rows takes the lock and moves the head once):
PostgreSQL reads the head row with `FOR UPDATE` (before the first row, when there is no head row
to lock, a transaction-scoped advisory lock serializes the writers that would create it); SQLite
writes the head row first, which takes the database's write lock before anything is read (the
busy timeout makes other writers, in this process or another, wait). On SQLite the first write
is, when it can be, the head's move itself: the rows are chained to the head this process last
wrote, and the head moves only if it is still that one (`WHERE seq = ... AND hash = ...`, under
the write lock); if another process appended meanwhile, or that transaction rolled back, nothing
moved and the head is read as above.
How a row is hashed is `engine.audit`'s business: `append_in` takes the hash function.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from ..errors import StoreError
from .audit_tables import audit_head, audit_log
from .db import Database
from .prepared import Prepared

#: `prev_hash` of the first row.
GENESIS_HASH = "0" * 64
#: Arbitrary constant key of the PostgreSQL advisory lock that serializes appends.
AUDIT_LOCK_KEY = 7_301_245_120

#: Hashes a row's stored fields chained to the previous row's hash.
RowHash = Callable[[Mapping[str, Any], str], str]


class AuditChainBroken(StoreError):
    """The audit chain head is missing or inconsistent; run `toolagent audit verify`."""


class AuditRows:
    """Append to and read the audit log's tables."""

    def __init__(self, db: Database) -> None:
        self.db = db
        # Built once, with bound parameters: these run twice per tool execution, and building a
        # statement with inline values costs more than executing it.
        head = audit_head.c
        # SQLite: one statement both takes the write lock and reads the head.
        self._claim_head = Prepared(
            audit_head.update()
            .where(head.id == 1)
            .values(updated_at=sa.bindparam("b_now"))
            .returning(head.seq, head.hash)
        )
        # PostgreSQL: one statement both takes the head row's lock and reads it.
        self._lock_head = Prepared(sa.select(head.seq, head.hash).where(head.id == 1).with_for_update())
        self._insert_row = Prepared(audit_log.insert())
        self._insert_head = audit_head.insert()
        move = (
            audit_head.update()
            .where(head.id == 1)
            .values(seq=sa.bindparam("b_seq"), hash=sa.bindparam("b_hash"), updated_at=sa.bindparam("b_now"))
        )
        self._move_head = Prepared(move)
        # SQLite: the move, only from the head this process last wrote.
        self._move_head_from = Prepared(
            move.where((head.seq == sa.bindparam("b_old_seq")) & (head.hash == sa.bindparam("b_old_hash")))
        )
        self._last_head: tuple[int, str] | None = None
        """The head as this process's last append left it (SQLite), which may not have committed."""
        # PostgreSQL: a lone row's insert and the head's move in one statement (one round trip).
        self._insert_row_moving_head = Prepared(audit_log.insert().add_cte(move.cte("moved_head")))

    def append_in(
        self,
        conn: sa.Connection,
        values: Mapping[str, Any],
        now: datetime,
        row_hash: RowHash,
        genesis: str = GENESIS_HASH,
    ) -> int:
        """Add a row with `values` at the end of the chain (the first row chains to `genesis`),
        inside the caller's transaction.

        Returns:
            The row's sequence number.

        Raises:
            AuditChainBroken: Rows exist but the chain head is gone (the log was tampered with).
        """
        return self.append_many_in(conn, [values], now, row_hash, genesis)[0]

    def append_many_in(
        self,
        conn: sa.Connection,
        rows: Sequence[Mapping[str, Any]],
        now: datetime,
        row_hash: RowHash,
        genesis: str = GENESIS_HASH,
    ) -> list[int]:
        """Add rows at the end of the chain, in order, inside the caller's transaction: one lock,
        one read of the head, one insert of every row, one update of the head (on SQLite, usually
        the update alone: the module docstring).

        Returns:
            The rows' sequence numbers.

        Raises:
            AuditChainBroken: Rows exist but the chain head is gone (the log was tampered with).
        """
        if not rows:
            return []
        if self.db.is_sqlite and self._last_head is not None:
            seq, prev_hash = self._last_head
            chained = _chained(rows, now, row_hash, seq, prev_hash)
            moved = {
                "b_seq": chained[-1]["seq"],
                "b_hash": chained[-1]["hash"],
                "b_now": now,
                "b_old_seq": seq,
                "b_old_hash": prev_hash,
            }
            if self._move_head_from.execute(conn, moved).rowcount == 1:
                self._insert_row.execute(conn, chained[0] if len(chained) == 1 else chained)
                self._last_head = (moved["b_seq"], moved["b_hash"])
                return [c["seq"] for c in chained]
        if self.db.is_sqlite:
            # The head is read by a write (UPDATE ... RETURNING), which takes SQLite's write lock
            # first (the same as BEGIN IMMEDIATE); a plain read first would let two writers chain
            # on the same row.
            head = self._claim_head.execute(conn, {"b_now": now}).first()
        else:
            # The head row's lock serializes appends: a writer waiting for it reads the head its
            # holder committed (PostgreSQL reads a locked row again once its lock is released).
            head = self._lock_head.execute(conn, {}).first()
            if head is None:
                # No head row to lock (the first append): the advisory lock serializes the writers
                # that would create it; each reads again, locking the row one of them may have made.
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": AUDIT_LOCK_KEY})
                head = self._lock_head.execute(conn, {}).first()
        if head is None:
            if conn.scalar(sa.select(sa.func.count()).select_from(audit_log)):
                raise AuditChainBroken(
                    "the audit chain head is missing but audit rows exist: "
                    "the audit log was tampered with; run `toolagent audit verify`"
                )
            seq, prev_hash = 0, genesis
        else:
            seq, prev_hash = int(head.seq), str(head.hash)
        chained = _chained(rows, now, row_hash, seq, prev_hash)
        seq, prev_hash = chained[-1]["seq"], chained[-1]["hash"]
        moved = {"b_seq": seq, "b_hash": prev_hash, "b_now": now}
        if head is not None and len(chained) == 1 and not self.db.is_sqlite:
            self._insert_row_moving_head.execute(conn, {**chained[0], **moved})
            return [seq]
        self._insert_row.execute(conn, chained[0] if len(chained) == 1 else chained)
        if head is None:
            conn.execute(self._insert_head, {"id": 1, "seq": seq, "hash": prev_hash, "updated_at": now})
        else:
            self._move_head.execute(conn, moved)
        if self.db.is_sqlite:
            self._last_head = (seq, prev_hash)
        return [c["seq"] for c in chained]

    @staticmethod
    def first_in(conn: sa.Connection) -> tuple[int, str] | None:
        """The oldest row's `(seq, prev_hash)`, or None for an empty log."""
        row = conn.execute(sa.select(audit_log.c.seq, audit_log.c.prev_hash).order_by(audit_log.c.seq).limit(1)).first()
        return None if row is None else (int(row.seq), str(row.prev_hash))

    async def head(self) -> tuple[int, str] | None:
        """The newest `(seq, hash)`, or None for an empty log."""
        async with self.db.begin() as conn:
            row = (await conn.execute(sa.select(audit_head.c.seq, audit_head.c.hash))).first()
        return None if row is None else (int(row.seq), str(row.hash))

    async def batch(self, after_seq: int, limit: int, since: datetime | None = None) -> list[Any]:
        """Up to `limit` rows after `after_seq` in sequence order (recorded at or after `since`)."""
        q = sa.select(audit_log).where(audit_log.c.seq > after_seq).order_by(audit_log.c.seq).limit(limit)
        if since is not None:
            q = q.where(audit_log.c.recorded_at >= since)
        async with self.db.begin() as conn:
            return list(await conn.execute(q))

    async def find(
        self, filters: Mapping[str, str | None], *, since: datetime | None, limit: int, newest_first: bool
    ) -> list[Any]:
        """Rows whose columns equal every non-None value of `filters` (recorded at or after `since`),
        oldest first (or newest first), at most `limit`."""
        q = sa.select(audit_log)
        for name, value in filters.items():
            if value is not None:
                q = q.where(audit_log.c[name] == value)
        if since is not None:
            q = q.where(audit_log.c.recorded_at >= since)
        q = q.order_by(audit_log.c.seq.desc() if newest_first else audit_log.c.seq).limit(max(0, limit))
        async with self.db.begin() as conn:
            return list(await conn.execute(q))


def _chained(
    rows: Sequence[Mapping[str, Any]], now: datetime, row_hash: RowHash, seq: int, prev_hash: str
) -> list[dict[str, Any]]:
    """`rows` as stored after the row `seq` whose hash is `prev_hash`: numbered and hashed in order."""
    chained: list[dict[str, Any]] = []
    for values in rows:
        seq += 1
        row = {"seq": seq, "recorded_at": now, **values, "prev_hash": prev_hash}
        row["hash"] = prev_hash = row_hash(row, prev_hash)
        chained.append(row)
    return chained


__all__ = ["AUDIT_LOCK_KEY", "GENESIS_HASH", "AuditChainBroken", "AuditRows", "RowHash"]
