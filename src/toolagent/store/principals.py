"""Users and API keys (`users`, `api_keys`): the rows behind `engine.principals.Principals`, and
`PrincipalChanges`, which tells a process caching keys when to drop its cache.

Every change that can narrow what a key may do (a revocation, a user's level or plan) raises the
one-row `principal_epoch` counter in the same transaction, and on PostgreSQL also sends
`NOTIFY toolagent_principals`, so every process learns of it at its commit.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg
from sqlalchemy.dialects import sqlite as sqlite_dialect

from . import engine_tables as et
from .db import Database, utcnow
from .prepared import Prepared

log = logging.getLogger(__name__)

_U = et.users
_K = et.api_keys
_E = et.principal_epoch
#: The PostgreSQL channel told of every change of `principal_epoch`.
CHANNEL = "toolagent_principals"
#: After a lost PostgreSQL listener, how long to serve uncached before trying to listen again.
RELISTEN_AFTER_S = 1.0
#: A key and its user's level and plan, by the key's hash (every API request).
_KEY_BY_HASH = (
    sa.select(_K, _U.c.level, _U.c.plan, _U.c.created_at.label("user_created_at"))
    .join(_U, _U.c.name == _K.c.user_name)
    .where(_K.c.key_hash == sa.bindparam("b_hash"))
)
_KEY_BY_ID = sa.select(_K).where(_K.c.id == sa.bindparam("b_id"))
_KEY_BY_ID_PREPARED = Prepared(_KEY_BY_ID)


class PrincipalRows:
    """Reads and writes of users and API keys; rows come back with the columns as fields."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def insert_user(self, name: str, *, level: str, plan: str, now: datetime) -> bool:
        """Add a user; False (and nothing written) when the name is taken."""
        async with self.db.begin() as conn:
            if await conn.scalar(sa.select(_U.c.name).where(_U.c.name == name)) is not None:
                return False
            await conn.execute(_U.insert().values(name=name, level=level, plan=plan, created_at=now, updated_at=now))
        return True

    async def user(self, name: str) -> Any | None:
        """The user's row, or None."""
        async with self.db.begin() as conn:
            return (await conn.execute(sa.select(_U).where(_U.c.name == name))).first()

    async def users(self) -> list[Any]:
        """Every user's row, by name."""
        async with self.db.begin() as conn:
            return list((await conn.execute(sa.select(_U).order_by(_U.c.name))).all())

    async def update_user(self, name: str, **values: str) -> bool:
        """Change a user's columns (and `updated_at`) and raise the epoch; False when there is no such user."""
        async with self.db.begin() as conn:
            result = await conn.execute(_U.update().where(_U.c.name == name).values(updated_at=utcnow(), **values))
            if result.rowcount:
                await self._bump(conn)
        return bool(result.rowcount)

    async def _bump(self, conn: Any) -> None:
        """Raise `principal_epoch` (creating its row) and, on PostgreSQL, notify the listeners; both
        take effect at the caller's commit."""
        dialect = pg if not self.db.is_sqlite else sqlite_dialect
        insert = dialect.insert(_E).values(id=1, epoch=1)
        await conn.execute(insert.on_conflict_do_update(index_elements=[_E.c.id], set_={"epoch": _E.c.epoch + 1}))
        if not self.db.is_sqlite:
            await conn.execute(sa.select(sa.func.pg_notify(CHANNEL, "")))

    async def insert_key(
        self,
        *,
        key_id: str,
        user: str,
        label: str | None,
        prefix: str,
        key_hash: str,
        scopes: list[str],
        created_at: datetime,
    ) -> None:
        """Store a new API key (its hash, never the key)."""
        async with self.db.begin() as conn:
            await conn.execute(
                _K.insert().values(
                    id=key_id,
                    user_name=user,
                    label=label,
                    prefix=prefix,
                    key_hash=key_hash,
                    scopes=scopes,
                    created_at=created_at,
                )
            )

    async def key(self, key_id: str) -> Any | None:
        """A key's row by id, or None."""
        async with self.db.begin() as conn:
            return (await conn.execute(_KEY_BY_ID, {"b_id": key_id})).first()

    @staticmethod
    def key_in(conn: sa.Connection, key_id: str) -> Any | None:
        """A key's row by id inside the caller's transaction, or None (every keyed call's admission
        re-checks its key with it)."""
        return _KEY_BY_ID_PREPARED.execute(conn, {"b_id": key_id}).first()

    async def keys(self, user: str | None = None) -> list[Any]:
        """Key rows (of one user), oldest first."""
        query = sa.select(_K).order_by(_K.c.created_at, _K.c.id)
        if user is not None:
            query = query.where(_K.c.user_name == user)
        async with self.db.begin() as conn:
            return list((await conn.execute(query)).all())

    async def revoke_key(self, key_id: str, now: datetime) -> None:
        """Set a key's `revoked_at`, unless it is revoked already."""
        async with self.db.begin() as conn:
            result = await conn.execute(
                _K.update().where((_K.c.id == key_id) & _K.c.revoked_at.is_(None)).values(revoked_at=now)
            )
            if result.rowcount:
                await self._bump(conn)

    async def key_by_hash(self, key_hash: str) -> Any | None:
        """A key's row with its user's `level`, `plan` and `user_created_at`, by the key's hash, or None."""
        return await self.db.read(lambda conn: conn.execute(_KEY_BY_HASH, {"b_hash": key_hash}).first())


class PrincipalChanges:
    """Whether users or keys may have changed since the last look, answered without a round trip.

    `token()` returns a value that differs from the previous one whenever `principal_epoch` may
    have moved, or None when it cannot tell (then nothing may be cached). Called on the event
    loop's thread, once per request; not thread-safe.

    - SQLite: `PRAGMA data_version` on a connection of its own changes when any other connection
      (of any process) commits; only then is the epoch row read (one more indexed read).
    - PostgreSQL: a connection of its own LISTENs on `CHANNEL`; `token()` takes in whatever the
      socket holds (no round trip) and counts notifications. The notification is queued at the
      change's commit, so a request arriving after it sees it. If the listener is lost, `token()`
      is None until it listens again (at most every `RELISTEN_AFTER_S`), and the count moves on
      that, as notifications may have been missed meanwhile.
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        self._sqlite: sqlite3.Connection | None = None
        self._pg: Any = None
        self._version: int | None = None
        self._epoch: int | None = None
        self._count = 0
        self._retry_at = 0.0

    def token(self) -> int | None:
        """The current token; see the class docstring."""
        try:
            return self._sqlite_token() if self.db.is_sqlite else self._pg_token()
        except Exception:  # noqa: BLE001 - any failure means "cannot tell": look keys up, and retry later
            log.warning("watching principal changes failed; API keys are looked up per request for now", exc_info=True)
            self.close()
            self._retry_at = time.monotonic() + RELISTEN_AFTER_S
            return None

    def _sqlite_token(self) -> int | None:
        if self._sqlite is None:
            if time.monotonic() < self._retry_at:
                return None
            self._sqlite = sqlite3.connect(
                self.db.url.split(":///", 1)[1], isolation_level=None, check_same_thread=False
            )
            self._version = None
        version = self._sqlite.execute("PRAGMA data_version").fetchone()[0]
        if version != self._version:
            row = self._sqlite.execute("SELECT epoch FROM principal_epoch WHERE id = 1").fetchone()
            self._version, self._epoch = version, row[0] if row else 0
        return self._epoch

    def _pg_token(self) -> int | None:
        if self._pg is None:
            if time.monotonic() < self._retry_at:
                return None
            import psycopg

            url = sa.engine.make_url(self.db.url).set(drivername="postgresql")
            self._pg = psycopg.connect(url.render_as_string(hide_password=False), autocommit=True, connect_timeout=5)
            self._pg.execute(f"LISTEN {CHANNEL}")
            self._count += 1  # changes made while nobody listened
        pgconn = self._pg.pgconn
        pgconn.consume_input()  # reads what the socket holds, never waits; raises once the connection is lost
        while pgconn.notifies() is not None:
            self._count += 1
        return self._count

    def close(self) -> None:
        """Close the watching connection (the next `token()` opens another)."""
        sqlite_conn, pg_conn, self._sqlite, self._pg = self._sqlite, self._pg, None, None
        for conn in (sqlite_conn, pg_conn):
            if conn is not None:
                try:
                    conn.close()
                except Exception:  # noqa: BLE001 - closing a broken connection
                    pass


__all__ = ["CHANNEL", "PrincipalChanges", "PrincipalRows"]
