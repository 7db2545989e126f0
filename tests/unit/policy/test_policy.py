"""`Policy.decide`, the one decision: the level x risk matrix, the order of its checks, API keys
(given, re-read, or standing in as the principal's key categories), as a table; and the property
that a listing's answer (no arguments, no call context) is the call's answer for the same caller."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from itertools import product

import pytest
from _support.factories import LEVEL_MAY_RUN, REQUIRED_LEVELS

from toolagent.engine.principals import ApiKey, Principal
from toolagent.model.entry import ToolEntry
from toolagent.model.permissions import CATEGORIES, LEVELS, RISKS, scope_categories
from toolagent.model.spec import ToolSpec
from toolagent.policy import ALLOW, ApprovalTerms, Decision, Policy
from toolagent.tools.base import CallContext

ALLOWED, REQUIRES = LEVEL_MAY_RUN, REQUIRED_LEVELS
POLICY = Policy()
NOW = datetime(2026, 12, 1, tzinfo=UTC)


def tool(name: str = "x/t", risk: str = "safe", category: str = "file", *, enabled: bool = True) -> ToolEntry:
    server, _, _ = name.partition("/")
    return ToolEntry(ToolSpec(name, server, name.partition("/")[2]), category, risk, "operator", enabled=enabled)


def user(level: str, name: str = "bob", categories: frozenset[str] | None = None) -> Principal:
    return Principal(name, level, "enterprise", categories=categories)


def key(*scopes: str, revoked: bool = False) -> ApiKey:
    return ApiKey("key_1", "bob", "ta_abc", tuple(scopes), NOW, revoked_at=NOW if revoked else None)


@pytest.mark.parametrize(("level", "risk"), sorted(ALLOWED))
def test_matrix(level: str, risk: str) -> None:
    d = POLICY.decide(user(level), tool(risk=risk))
    assert d.allowed is ALLOWED[(level, risk)]
    if d.allowed:
        assert d is ALLOW and d.effect == "allow"
    else:
        assert (d.effect, d.code, d.decided_by) == ("deny", "level", "matrix")
        assert d.reason is not None
        assert d.reason.startswith(f"user 'bob' ({level}) may not run 'x/t' (risk {risk}): ")
        assert d.reason.endswith(f"requires {REQUIRES[risk]}")


def test_dangerous_reason_in_full() -> None:
    d = POLICY.decide(user("execute_basic"), tool("shell/exec", "dangerous", "shell"))
    assert d.reason == "user 'bob' (execute_basic) may not run 'shell/exec' (risk dangerous): requires admin"


def test_unknown_level_or_risk_is_denied() -> None:
    assert POLICY.decide(user("root"), tool()).code == "level"
    assert not POLICY.decide(user("admin"), tool(risk="weird")).allowed


def test_order_disabled_then_agent_list_then_level_then_key() -> None:
    write = tool("fs/write", "dangerous", "file")
    # Everything wrong at once: the first check in the order names the reason and what decided.
    off = replace(write, enabled=False)
    ctx = CallContext(user("view_only"), api_key=key(), agent_tools=["fs/read"])
    d = POLICY.decide(ctx.principal, off, context=ctx)
    assert (d.code, d.decided_by) == ("disabled", "operator")
    d = POLICY.decide(ctx.principal, write, context=ctx)
    assert (d.code, d.decided_by) == ("not_in_agent", "agent") and "fs/read" in (d.reason or "")
    ctx = replace(ctx, agent_tools=["fs/write"])
    assert POLICY.decide(ctx.principal, write, context=ctx).code == "level"
    ctx = replace(ctx, principal=user("admin"), api_key=key("agent:execute:web"))
    d = POLICY.decide(ctx.principal, write, context=ctx)
    assert (d.code, d.decided_by) == ("api_key_scope", "api_key")
    assert d.reason == (
        "API key key_1 lacks scope 'agent:execute:file' for 'fs/write' (category file; the key has: agent:execute:web)"
    )
    revoked = replace(ctx, api_key=key("*", revoked=True))
    assert POLICY.decide(revoked.principal, write, context=revoked).code == "api_key_revoked"
    ok = replace(ctx, api_key=key("agent:execute:file"))
    assert POLICY.decide(ok.principal, write, context=ok) is ALLOW


def test_a_key_read_again_overrides_the_one_the_caller_came_with() -> None:
    # The admission's re-check: revoked since the caller authenticated, or its scopes narrowed.
    ctx = CallContext(user("admin"), api_key=key("*"))
    assert POLICY.decide(ctx.principal, tool(), context=ctx) is ALLOW
    assert POLICY.decide(ctx.principal, tool(), context=ctx, key=key("*", revoked=True)).code == "api_key_revoked"
    assert POLICY.decide(ctx.principal, tool(), context=ctx, key=key("agent:execute:web")).code == "api_key_scope"


def test_without_a_key_the_principals_key_categories_stand_in_for_its_scopes() -> None:
    # A listing asks with the principal alone; a scoped key made it, and its categories say so.
    scoped = user("admin", categories=frozenset({"memory"}))
    assert POLICY.decide(scoped, tool("mem/get", category="memory")) is ALLOW
    d = POLICY.decide(scoped, tool("shell/exec", "dangerous", "shell"))
    assert (d.effect, d.code) == ("deny", "api_key_scope")
    assert "agent:execute:shell" in (d.reason or "") and "agent:execute:memory" in (d.reason or "")


def test_the_decision_type_carries_approve() -> None:
    # No built-in check produces it yet; rules and approvals plug in without a new signature.
    pending = Decision("approve", "needs an admin's approval", "approval", "rule:prod-writes")
    assert not pending.allowed and pending.effect == "approve"


@dataclass(frozen=True)
class Caller:
    level: str
    scopes: tuple[str, ...] | None  # None: no key (the CLI)


CALLERS = [
    Caller(level, scopes)
    for level, scopes in product(
        LEVELS, [None, ("*",), ("agent:execute:*",), ("agent:execute:memory",), ("agent:execute:shell",), ()]
    )
]
TOOLS = [tool(f"s/{c}-{r}", r, c) for c, r in product(CATEGORIES, RISKS)] + [tool("s/off", enabled=False)]


@pytest.mark.parametrize("caller", CALLERS, ids=lambda c: f"{c.level}-{c.scopes}")
def test_a_listing_says_what_a_call_would_be_told(caller: Caller) -> None:
    # The principal of an authenticated request carries its key's categories; the call carries the key.
    categories = None if caller.scopes is None else scope_categories(caller.scopes)
    principal = user(caller.level, categories=categories)
    ctx = CallContext(principal, api_key=None if caller.scopes is None else key(*caller.scopes))
    for entry in TOOLS:
        listed = POLICY.decide(principal, entry)
        called = POLICY.decide(principal, entry, args={}, context=ctx)
        assert listed.allowed is called.allowed, (entry.name, listed, called)
        assert listed.code == called.code


@dataclass
class RecordingRules:
    """Rules that answer `answer` and count how often they were asked."""

    answer: Decision | None
    asked: int = 0
    revision: str = "r1"

    def judge(self, principal, tool, *, args, context):  # type: ignore[no-untyped-def]
        self.asked += 1
        return self.answer


def test_rules_are_asked_only_after_the_fixed_checks_allow() -> None:
    rules = RecordingRules(Decision("deny", "no", "rule", "rule:r"))
    policy = Policy(rules=rules)
    refused = policy.decide(user("view_only"), tool(risk="moderate"))
    assert refused.decided_by == "matrix"
    assert rules.asked == 0
    judged = policy.decide(user("admin"), tool(risk="moderate"))
    assert (judged.effect, judged.decided_by, rules.asked) == ("deny", "rule:r", 1)


def test_rules_only_narrow_an_allow_from_a_rule_is_no_answer() -> None:
    policy = Policy(rules=RecordingRules(ALLOW))
    assert policy.decide(user("view_only"), tool(risk="moderate")).effect == "deny"
    assert policy.decide(user("admin"), tool(risk="moderate")) is ALLOW


def test_an_approve_decision_carries_its_terms_and_rules_can_be_swapped() -> None:
    terms = ApprovalTerms("prod-sql", approver_level="admin", expires_s=900, revision="r1")
    policy = Policy()
    assert policy.decide(user("admin"), tool(risk="dangerous")) is ALLOW
    policy.use_rules(RecordingRules(Decision("approve", "needs an admin", "rule", "rule:prod-sql", terms)))
    decision = policy.decide(user("admin"), tool(risk="dangerous"))
    assert decision.effect == "approve"
    assert decision.terms == terms
    assert not decision.allowed
    policy.use_rules(None)
    assert policy.decide(user("admin"), tool(risk="dangerous")) is ALLOW
