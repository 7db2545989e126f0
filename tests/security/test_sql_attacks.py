"""The SQL guard refuses every attack in `sql_attacks.py` under the Supabase server's default policy."""

from __future__ import annotations

import pytest

from toolagent.sql import SqlGuard, SqlPolicy

from .sql_attacks import ALLOWED, ATTRIBUTE_NOTATION, CATALOG_CASTS, DEMO_TABLES, OTHER_CALLS

GUARD = SqlGuard(SqlPolicy.from_security(denied_operations=None, allowed_tables=DEMO_TABLES))
OPEN_GUARD = SqlGuard(SqlPolicy())

ATTACKS = ATTRIBUTE_NOTATION + CATALOG_CASTS + OTHER_CALLS


@pytest.mark.parametrize(("sql", "needle"), ATTACKS)
def test_attack_is_refused(sql: str, needle: str) -> None:
    decision = GUARD.check(sql)
    assert not decision.allowed, sql
    assert any(needle in reason for reason in decision.reasons), decision.reasons


@pytest.mark.parametrize(("sql", "needle"), ATTRIBUTE_NOTATION + CATALOG_CASTS)
def test_function_calls_without_call_syntax_are_refused_without_a_table_allowlist(sql: str, needle: str) -> None:
    # The function allowlist applies even where no table allowlist is configured.
    decision = OPEN_GUARD.check(sql)
    assert not decision.allowed, sql
    assert any(needle in reason for reason in decision.reasons), decision.reasons


@pytest.mark.parametrize("sql", ALLOWED)
def test_ordinary_sql_is_still_allowed(sql: str) -> None:
    decision = GUARD.check(sql)
    assert decision.allowed, decision.reasons
