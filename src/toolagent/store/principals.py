"""Users and API keys (`users`, `api_keys`): the rows behind `engine.principals.Principals`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from . import engine_tables as et
from .db import Database, utcnow

_U = et.users
_K = et.api_keys
#: A key and its user's level and plan, by the key's hash (every API request).
_KEY_BY_HASH = (sa.select(_K, _U.c.level, _U.c.plan, _U.c.created_at.label("user_created_at"))
                .join(_U, _U.c.name == _K.c.user_name)
                .where(_K.c.key_hash == sa.bindparam("b_hash")))
_KEY_BY_ID = sa.select(_K).where(_K.c.id == sa.bindparam("b_id"))


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
        """Change a user's columns (and `updated_at`); False when there is no such user."""
        async with self.db.begin() as conn:
            result = await conn.execute(_U.update().where(_U.c.name == name).values(updated_at=utcnow(), **values))
        return bool(result.rowcount)

    async def insert_key(self, *, key_id: str, user: str, label: str | None, prefix: str, key_hash: str,
                         scopes: list[str], created_at: datetime) -> None:
        """Store a new API key (its hash, never the key)."""
        async with self.db.begin() as conn:
            await conn.execute(_K.insert().values(id=key_id, user_name=user, label=label, prefix=prefix,
                                                  key_hash=key_hash, scopes=scopes, created_at=created_at))

    async def key(self, key_id: str) -> Any | None:
        """A key's row by id, or None."""
        async with self.db.begin() as conn:
            return (await conn.execute(_KEY_BY_ID, {"b_id": key_id})).first()

    @staticmethod
    def key_in(conn: sa.Connection, key_id: str) -> Any | None:
        """A key's row by id inside the caller's transaction, or None."""
        return conn.execute(_KEY_BY_ID, {"b_id": key_id}).first()

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
            await conn.execute(_K.update().where((_K.c.id == key_id) & _K.c.revoked_at.is_(None)).values(revoked_at=now))

    async def key_by_hash(self, key_hash: str) -> Any | None:
        """A key's row with its user's `level`, `plan` and `user_created_at`, by the key's hash, or None."""
        return await self.db.read(lambda conn: conn.execute(_KEY_BY_HASH, {"b_hash": key_hash}).first())


__all__ = ["PrincipalRows"]
