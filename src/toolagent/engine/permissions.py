"""Parsing what a user typed into the permission vocabulary (`model/permissions.py`): each
function answers with the valid value or a `UsageError` that lists the choices."""

from __future__ import annotations

from ..errors import UsageError
from ..model.permissions import CATEGORIES, LEVELS, PLANS, SCOPE_ALL, SCOPE_EXECUTE_PREFIX, Category, Level, Plan


def parse_level(value: str) -> Level:
    """A valid level, or UsageError naming the choices."""
    if value not in LEVELS:
        raise UsageError(f"unknown permission level {value!r}: use one of {', '.join(LEVELS)}")
    return value


def parse_plan(value: str) -> Plan:
    """A valid plan, or UsageError naming the choices."""
    if value not in PLANS:
        raise UsageError(f"unknown plan {value!r}: use one of {', '.join(PLANS)}")
    return value


def parse_category(value: str) -> Category:
    """A valid category, or UsageError naming the choices."""
    if value not in CATEGORIES:
        raise UsageError(f"unknown category {value!r}: use one of {', '.join(CATEGORIES)}")
    return value


def parse_scope(value: str) -> str:
    """A valid API key scope: `*`, `agent:execute:*` or `agent:execute:CATEGORY`.

    Raises:
        UsageError: anything else (the message lists the forms).
    """
    if value == SCOPE_ALL:
        return value
    if value.startswith(SCOPE_EXECUTE_PREFIX):
        rest = value[len(SCOPE_EXECUTE_PREFIX) :]
        if rest == "*" or rest in CATEGORIES:
            return value
    raise UsageError(
        f"invalid scope {value!r}: use '*', 'agent:execute:*' or 'agent:execute:CATEGORY' "
        f"with CATEGORY one of {', '.join(CATEGORIES)}"
    )


__all__ = ["parse_category", "parse_level", "parse_plan", "parse_scope"]
