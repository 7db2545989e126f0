"""Permission levels, tool risk, categories and API key scopes: the vocabulary the policy decides with.

Which permission level may run which risk:

| level \\ risk      | safe | moderate | dangerous |
| ---                | ---  | ---      | ---       |
| `view_only`        | no   | no       | no        |
| `execute_basic`    | yes  | no       | no        |
| `execute_advanced` | yes  | yes      | no        |
| `admin`            | yes  | yes      | yes       |

The decision itself (enabled, agent tool list, this matrix, the API key) is `policy.Policy.decide`;
rate limits and budgets come after it (`engine/limits.py`), because they count in the store.
Parsing a user's words for these is `engine/permissions.py`.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final, Literal

Level = Literal["view_only", "execute_basic", "execute_advanced", "admin"]
Risk = Literal["safe", "moderate", "dangerous"]
Category = Literal["browser", "file", "shell", "web", "database", "ai", "system", "workflow", "memory", "agent"]
Plan = Literal["free", "starter", "team", "enterprise"]

#: Permission levels, weakest first.
LEVELS: Final[tuple[Level, ...]] = ("view_only", "execute_basic", "execute_advanced", "admin")
#: Risk levels, mildest first.
RISKS: Final[tuple[Risk, ...]] = ("safe", "moderate", "dangerous")
#: The ten tool categories, in discovery order.
CATEGORIES: Final[tuple[Category, ...]] = (
    "browser",
    "file",
    "shell",
    "web",
    "database",
    "ai",
    "system",
    "workflow",
    "memory",
    "agent",
)
#: Subscription plans.
PLANS: Final[tuple[Plan, ...]] = ("free", "starter", "team", "enterprise")

#: The riskiest tool each level may run (`None`: nothing).
MAX_RISK: Final[dict[str, Risk | None]] = {
    "view_only": None,
    "execute_basic": "safe",
    "execute_advanced": "moderate",
    "admin": "dangerous",
}
_RISK_RANK: Final[dict[str, int]] = {r: i for i, r in enumerate(RISKS)}
# (level, risk) -> allowed; built once so the hot path is one dict lookup.
_MATRIX: Final[dict[tuple[str, str], bool]] = {
    (lv, rk): MAX_RISK[lv] is not None and _RISK_RANK[rk] <= _RISK_RANK[MAX_RISK[lv] or "safe"]
    for lv in LEVELS
    for rk in RISKS
}

#: The scope that allows every category.
SCOPE_ALL = "*"
#: Prefix of the per-category execute scopes (`agent:execute:shell`); `agent:execute:*` allows all.
SCOPE_EXECUTE_PREFIX = "agent:execute:"

#: Denial codes, used as the `reason` label of the denial metrics.
DENIAL_DISABLED = "disabled"
DENIAL_NOT_IN_AGENT = "not_in_agent"
DENIAL_LEVEL = "level"
DENIAL_KEY_REVOKED = "api_key_revoked"
DENIAL_KEY_SCOPE = "api_key_scope"
DENIAL_RATE_LIMITED = "rate_limited"
DENIAL_BUDGET = "budget"


def can_run(level: str, risk: str) -> bool:
    """Whether `level` may run a tool of `risk` (unknown values: no)."""
    return _MATRIX.get((level, risk), False)


def levels_for(risk: str) -> tuple[Level, ...]:
    """The levels allowed to run a tool of `risk`, weakest first."""
    return tuple(lv for lv in LEVELS if can_run(lv, risk))


def _or_list(items: Collection[str]) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def required_for(risk: str) -> str:
    """`execute_advanced or admin`: the levels that may run a tool of `risk`, for messages."""
    return _or_list(levels_for(risk))


def scope_for(category: str) -> str:
    """The scope an API key needs to run a tool of `category`."""
    return SCOPE_EXECUTE_PREFIX + category


def scopes_allow(scopes: Collection[str], category: str) -> bool:
    """Whether a key with `scopes` may run a tool of `category`."""
    return SCOPE_ALL in scopes or (SCOPE_EXECUTE_PREFIX + "*") in scopes or (SCOPE_EXECUTE_PREFIX + category) in scopes


def scope_categories(scopes: Collection[str]) -> frozenset[str] | None:
    """The categories a key with `scopes` acts within: None for every category (`*` or
    `agent:execute:*`), else exactly those its `agent:execute:<category>` scopes name."""
    if SCOPE_ALL in scopes or (SCOPE_EXECUTE_PREFIX + "*") in scopes:
        return None
    return frozenset(s[len(SCOPE_EXECUTE_PREFIX) :] for s in scopes if s.startswith(SCOPE_EXECUTE_PREFIX))


__all__ = [
    "CATEGORIES",
    "DENIAL_BUDGET",
    "DENIAL_DISABLED",
    "DENIAL_KEY_REVOKED",
    "DENIAL_KEY_SCOPE",
    "DENIAL_LEVEL",
    "DENIAL_NOT_IN_AGENT",
    "DENIAL_RATE_LIMITED",
    "LEVELS",
    "MAX_RISK",
    "PLANS",
    "RISKS",
    "SCOPE_ALL",
    "SCOPE_EXECUTE_PREFIX",
    "Category",
    "Level",
    "Plan",
    "Risk",
    "can_run",
    "scope_categories",
    "levels_for",
    "required_for",
    "scope_for",
    "scopes_allow",
]
