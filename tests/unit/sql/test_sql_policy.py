"""SqlPolicy construction and PostgreSQL identifier folding."""

from __future__ import annotations

import dataclasses

import pytest

from toolagent.sql import DEFAULT_DENIED_OPERATIONS, DEFAULT_MAX_BYTES, SqlPolicy, check_sql
from toolagent.sql.names import fold_identifier, normalize_table_name


def test_defaults() -> None:
    policy = SqlPolicy()
    assert policy.allowed_tables is None
    assert (
        policy.denied_operations
        == DEFAULT_DENIED_OPERATIONS
        == frozenset({"DROP", "TRUNCATE", "ALTER", "DELETE", "UPDATE"})
    )
    assert policy.dialect == "postgres"
    assert policy.read_only is True
    assert policy.max_bytes == DEFAULT_MAX_BYTES == 100_000


def test_policy_is_frozen_and_hashable() -> None:
    policy = SqlPolicy.from_security(["drop"], ["users"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.read_only = False  # type: ignore[misc]
    assert hash(policy) == hash(SqlPolicy.from_security(["DROP"], ["USERS"]))


TABLE_NAMES = [
    pytest.param("users", "users", id="plain"),
    pytest.param("Users", "users", id="unquoted-folds"),
    pytest.param("AGENT_CONVERSATIONS", "agent_conversations", id="unquoted-upper"),
    pytest.param('"Users"', "Users", id="quoted-exact"),
    pytest.param('"users"', "users", id="quoted-lower"),
    pytest.param("public.users", "users", id="public-dropped"),
    pytest.param("PUBLIC.Users", "users", id="public-folded-and-dropped"),
    pytest.param('"public"."Users"', "Users", id="quoted-public"),
    pytest.param("Analytics.Events", "analytics.events", id="other-schema-kept"),
    pytest.param('"a.b"', "a.b", id="dot-inside-quotes"),
    pytest.param('"say ""hi"""', 'say "hi"', id="doubled-quote"),
    pytest.param(" users ", "users", id="surrounding-space"),
    pytest.param("ÜSERS", "Üsers", id="only-ascii-folds"),
]


@pytest.mark.parametrize(("configured", "normalized"), TABLE_NAMES)
def test_table_name_normalization(configured: str, normalized: str) -> None:
    assert normalize_table_name(configured) == normalized
    assert SqlPolicy.from_security(None, [configured]).allowed_tables == frozenset({normalized})


@pytest.mark.parametrize(
    "bad", ['"users', "a..b", "a.b.c.d", "users x"], ids=["unterminated", "empty-part", "four-parts", "space"]
)
def test_malformed_table_names_raise(bad: str) -> None:
    with pytest.raises(ValueError):
        SqlPolicy.from_security(None, [bad])


def test_fold_identifier() -> None:
    assert fold_identifier("UsErS", quoted=False) == "users"
    assert fold_identifier("UsErS", quoted=True) == "UsErS"
    assert fold_identifier("ÉTÉ", quoted=False) == "ÉtÉ"


def test_operations_are_upper_cased() -> None:
    policy = SqlPolicy.from_security(["drop", " Insert ", ""], None)
    assert policy.denied_operations == frozenset({"DROP", "INSERT"})
    assert policy.allowed_tables is None


def test_from_security_defaults_and_passthrough() -> None:
    policy = SqlPolicy.from_security(None, [], read_only=False, max_bytes=10, dialect="postgres")
    assert policy.denied_operations == DEFAULT_DENIED_OPERATIONS
    assert policy.allowed_tables == frozenset()
    assert (policy.read_only, policy.max_bytes) == (False, 10)


def test_empty_allowlist_refuses_every_table() -> None:
    decision = check_sql("select * from users", SqlPolicy.from_security(None, []))
    assert decision.reasons == ("table 'users' is not in allowed tables (none)",)
    assert check_sql("select 1", SqlPolicy.from_security(None, [])).allowed


def test_quoted_allowlist_entry_matches_quoted_reference_only() -> None:
    policy = SqlPolicy.from_security(None, ['"Users"'])
    assert check_sql('select * from "Users"', policy).allowed
    assert not check_sql("select * from Users", policy).allowed


def test_schema_qualified_allowlist_entry() -> None:
    policy = SqlPolicy.from_security(None, ["analytics.events", "users"])
    assert check_sql("select * from analytics.events join users on true", policy).tables == (
        "analytics.events",
        "users",
    )
    assert check_sql("select * from analytics.events", policy).allowed
    assert not check_sql("select * from events", policy).allowed


def test_non_ascii_names_do_not_fold() -> None:
    policy = SqlPolicy.from_security(None, ["üsers"])
    assert check_sql("select * from üsers", policy).allowed
    assert not check_sql("select * from ÜSERS", policy).allowed


@pytest.mark.parametrize(
    "kwargs",
    [{"dialect": "no-such-dialect"}, {"max_bytes": 0}, {"max_bytes": -1}, {"max_bytes": True}],
    ids=["unknown-dialect", "zero-bytes", "negative-bytes", "bool-bytes"],
)
def test_invalid_policy_values_raise(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        SqlPolicy(**kwargs)  # type: ignore[arg-type]
