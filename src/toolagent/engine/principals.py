"""Principals: users with a permission level and a plan, and their API keys.

API keys are `ta_` + 43 URL-safe characters (256 random bits). Only their SHA-256 is stored:
for keys this random a fast hash is enough (no dictionary to guess from), and it lets a key be
looked up by its hash directly. The key is shown once, by `create_key`.

An API server authenticates every request; `authenticate_key` keeps the keys it has resolved in
memory, and drops them all whenever another change to users or keys may narrow what one may do (a
revocation, a user's level or plan): `store.principals.PrincipalChanges` tells, at no database
round trip per request, and at once across processes. A key's scopes never change after it is
made. Tool calls also re-read their key in the admission transaction (see `tools.admission`).

The CLI acts as the user named by `--user` / `TOOLAGENT_USER`, else as a local user named after
the OS account, created on first use at the configured level and plan.
"""

from __future__ import annotations

import getpass
import hashlib
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..errors import NotFound, StoreError, Unauthenticated, UsageError
from ..model.permissions import SCOPE_ALL, scope_categories
from ..model.times import as_utc
from ..store.db import Connection, Database, utcnow
from ..store.principals import PrincipalChanges, PrincipalRows
from .config import EngineConfig
from .permissions import parse_level, parse_plan, parse_scope

#: Prefix of every API key (lets secret scanners and the redactor recognize them).
KEY_PREFIX = "ta_"
#: Characters of the key kept for display (`ta_AbCdEfG…`), never enough to use it.
SHOWN_PREFIX_CHARS = 10
#: Resolved keys an API process keeps; past it the oldest goes (unknown and revoked keys are never kept).
KEY_CACHE_SIZE = 10_000
#: The local user's name when the OS user cannot be determined.
FALLBACK_LOCAL_USER = "local"

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,199}$")


@dataclass(frozen=True)
class Principal:
    """Who a call is made for."""

    name: str
    """Unique user name; recorded on executions."""
    level: str
    """Permission level: `view_only`, `execute_basic`, `execute_advanced` or `admin`."""
    plan: str
    """Subscription plan: `free`, `starter`, `team` or `enterprise` (sets limits)."""
    created_at: datetime | None = None
    """When the user was added."""
    categories: frozenset[str] | None = None
    """The tool categories the API key in use acts within; None: every category (an unscoped key,
    or no key at all, as on the CLI). A scoped key reads, lists and cancels only executions, tools
    and runs of these categories, whatever the user's level."""

    @property
    def is_admin(self) -> bool:
        """Admins see and cancel every execution (within their key's categories)."""
        return self.level == "admin"

    def sees_category(self, category: str) -> bool:
        """Whether the key in use acts within `category`."""
        return self.categories is None or category in self.categories

    def sees(self, user: str, category: str) -> bool:
        """Whether an execution of `user` in `category` is visible to (and cancellable by) this
        principal: its own or, for an admin, anyone's, and always within the key's categories."""
        return (self.is_admin or user == self.name) and self.sees_category(category)

    def to_json(self) -> dict[str, Any]:
        """CLI/API form."""
        return {
            "name": self.name,
            "level": self.level,
            "plan": self.plan,
            "createdAt": self.created_at.isoformat() if self.created_at else None,
        }


@dataclass(frozen=True)
class ApiKey:
    """A stored API key (never the key itself)."""

    id: str
    """Public id (`key_…`), used to list and revoke, and recorded on executions."""
    user: str
    """The user the key acts for."""
    prefix: str
    """The key's first characters, to recognize it."""
    scopes: tuple[str, ...]
    """`*`, `agent:execute:*` or `agent:execute:CATEGORY` entries."""
    created_at: datetime
    """When it was created."""
    revoked_at: datetime | None = None
    """When it was revoked; None while active."""
    label: str | None = None
    """A name given at creation."""

    @property
    def active(self) -> bool:
        """Not revoked."""
        return self.revoked_at is None

    def to_json(self) -> dict[str, Any]:
        """CLI/API form."""
        return {
            "id": self.id,
            "user": self.user,
            "label": self.label,
            "prefix": self.prefix,
            "scopes": list(self.scopes),
            "createdAt": self.created_at.isoformat(),
            "revokedAt": self.revoked_at.isoformat() if self.revoked_at else None,
            "active": self.active,
        }


def hash_key(raw: str) -> str:
    """The stored form of a key."""
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def local_user_name() -> str:
    """The OS user's name, else `local`."""
    try:
        name = getpass.getuser()
    except (OSError, KeyError):
        return FALLBACK_LOCAL_USER
    return name if name and _NAME.match(name) else FALLBACK_LOCAL_USER


def check_name(name: str) -> str:
    """A valid user name, or UsageError saying what is allowed."""
    if not _NAME.match(name):
        raise UsageError(
            f"invalid user name {name!r}: use 1-200 letters, digits and . _ @ + - (starting with a letter or digit)"
        )
    return name


def _principal(row: Any) -> Principal:
    return Principal(row.name, row.level, row.plan, as_utc(row.created_at))


def _key(row: Any) -> ApiKey:
    return ApiKey(
        row.id,
        row.user_name,
        row.prefix,
        tuple(row.scopes or ()),
        as_utc(row.created_at),
        as_utc(row.revoked_at),
        row.label,
    )


class Principals:
    """Users and API keys in the store."""

    def __init__(self, db: Database, config: EngineConfig | None = None) -> None:
        self.db = db
        self.config = config or EngineConfig()
        self.rows = PrincipalRows(db)
        self._changes = PrincipalChanges(db)
        self._keys: dict[str, tuple[Principal, ApiKey]] = {}
        self._keys_token: int | None = None

    # -- users ---------------------------------------------------------------------------------

    async def add_user(self, name: str, *, level: str | None = None, plan: str = "free") -> Principal:
        """Add a user; without `level`, the plan's default level.

        Raises:
            UsageError: invalid name, level or plan, or the user exists.
        """
        check_name(name)
        plan = parse_plan(plan)
        level = parse_level(level) if level is not None else self.config.plan(plan).level
        now = utcnow()
        if not await self.rows.insert_user(name, level=level, plan=plan, now=now):
            raise UsageError(f"user '{name}' already exists: change it with `toolagent users set-level {name} LEVEL`")
        return Principal(name, level, plan, now)

    async def get_user(self, name: str) -> Principal:
        """One user.

        Raises:
            NotFound: no such user.
        """
        row = await self.rows.user(name)
        if row is None:
            raise NotFound(f"user '{name}' not found: add it with `toolagent users add {name} --level execute_basic`")
        return _principal(row)

    async def list_users(self) -> list[Principal]:
        """Every user, by name."""
        return [_principal(r) for r in await self.rows.users()]

    async def _update_user(self, name: str, **values: str) -> Principal:
        if not await self.rows.update_user(name, **values):
            raise NotFound(f"user '{name}' not found: add it with `toolagent users add {name}`")
        return await self.get_user(name)

    async def set_level(self, name: str, level: str) -> Principal:
        """Change a user's permission level.

        Raises:
            UsageError: unknown level. NotFound: no such user.
        """
        return await self._update_user(name, level=parse_level(level))

    async def set_plan(self, name: str, plan: str) -> Principal:
        """Change a user's plan (its limits; the level stays as it is).

        Raises:
            UsageError: unknown plan. NotFound: no such user.
        """
        return await self._update_user(name, plan=parse_plan(plan))

    async def resolve_cli_user(self, name: str | None) -> Principal:
        """The CLI's principal: the named user, else the local user (created on first use).

        Raises:
            NotFound: `name` is given but no such user exists.
        """
        if name:
            return await self.get_user(name)
        local = local_user_name()
        try:
            return await self.get_user(local)
        except NotFound:
            pass
        try:
            return await self.add_user(local, level=self.config.local_user_level, plan=self.config.local_user_plan)
        except (UsageError, StoreError):
            # Another process created it between the read and the insert (the insert then
            # fails on the primary key); the read below finds that user.
            return await self.get_user(local)

    # -- API keys ------------------------------------------------------------------------------

    async def create_key(
        self, user: str, *, scopes: Sequence[str] = (), label: str | None = None
    ) -> tuple[ApiKey, str]:
        """Create a key for `user` (default scope `*`); returns the record and the key, shown only now.

        Raises:
            NotFound: no such user. UsageError: an invalid scope.
        """
        checked = tuple(dict.fromkeys(parse_scope(s) for s in scopes)) or (SCOPE_ALL,)
        await self.get_user(user)
        raw = KEY_PREFIX + secrets.token_urlsafe(32)
        key = ApiKey(
            id="key_" + secrets.token_hex(8),
            user=user,
            prefix=raw[:SHOWN_PREFIX_CHARS],
            scopes=checked,
            created_at=utcnow(),
            label=label,
        )
        await self.rows.insert_key(
            key_id=key.id,
            user=user,
            label=label,
            prefix=key.prefix,
            key_hash=hash_key(raw),
            scopes=list(checked),
            created_at=key.created_at,
        )
        return key, raw

    async def get_key(self, key_id: str) -> ApiKey:
        """One key by id.

        Raises:
            NotFound: no such key.
        """
        row = await self.rows.key(key_id)
        if row is None:
            raise NotFound(f"API key '{key_id}' not found: `toolagent keys list` shows the keys")
        return _key(row)

    @staticmethod
    def key_in(conn: Connection, key_id: str) -> ApiKey | None:
        """One key by id inside the caller's transaction, or None."""
        row = PrincipalRows.key_in(conn, key_id)
        return None if row is None else _key(row)

    async def list_keys(self, user: str | None = None) -> list[ApiKey]:
        """Keys (of one user), oldest first."""
        return [_key(r) for r in await self.rows.keys(user)]

    async def revoke_key(self, key_id: str) -> ApiKey:
        """Revoke a key (revoking twice keeps the first time).

        Raises:
            NotFound: no such key.
        """
        await self.rows.revoke_key(key_id, utcnow())
        return await self.get_key(key_id)

    async def authenticate_key(self, raw_key: str) -> tuple[Principal, ApiKey]:
        """The user and key a raw key belongs to.

        Raises:
            Unauthenticated: the key is malformed, unknown or revoked, or its user is gone.
        """
        if not raw_key.startswith(KEY_PREFIX):
            raise Unauthenticated(f"not an API key: keys start with '{KEY_PREFIX}'")
        digest = hash_key(raw_key)
        # The token is read before the row: a change committed after the row was read moves the
        # token, so the next request drops what this one caches.
        token = self._changes.token()
        if token is None or token != self._keys_token:
            self._keys.clear()
            self._keys_token = token
        if token is not None and (hit := self._keys.get(digest)) is not None:
            return hit
        row = await self.rows.key_by_hash(digest)
        if row is None:
            raise Unauthenticated("unknown API key")
        key = _key(row)
        if key.revoked_at is not None:
            raise Unauthenticated(f"API key {key.id} was revoked at {key.revoked_at.isoformat(timespec='seconds')}")
        found = (
            Principal(
                key.user, row.level, row.plan, as_utc(row.user_created_at), categories=scope_categories(key.scopes)
            ),
            key,
        )
        # Another request may have seen the token move while this one read: then keep nothing.
        if token is not None and self._keys_token == token:
            if len(self._keys) >= KEY_CACHE_SIZE:
                del self._keys[next(iter(self._keys))]
            self._keys[digest] = found
        return found

    def close(self) -> None:
        """Forget the cached keys and close the connection watching for changes."""
        self._keys.clear()
        self._keys_token = None
        self._changes.close()


__all__ = [
    "FALLBACK_LOCAL_USER",
    "KEY_CACHE_SIZE",
    "KEY_PREFIX",
    "ApiKey",
    "Principal",
    "Principals",
    "Unauthenticated",
    "check_name",
    "hash_key",
    "local_user_name",
]
