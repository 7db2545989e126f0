"""`Policy.decide`: the checks that need no I/O, in order.

1. the operator left the tool enabled (`decided_by="operator"`);
2. for BUILD steps and calls under an agent, the tool is in the agent's tool list (`agent`);
3. the caller's level covers the tool's risk (`matrix`, the table in `model/permissions.py`);
4. the API key in use, if any, is active and its scopes cover the tool's category (`api_key`);
5. the operator's rules (`Rules`), asked only when 1-4 allow: a rule may deny or ask for
   approval (`rule:<id>`), never allow what 1-4 refused (rules only narrow).

With no API key in the context, the principal's own key categories (`Principal.categories`, set
when the caller authenticated with a scoped key) stand in for the scopes: a listing made with a
scoped key marks as runnable only what a call with that key may run.

The allow path allocates nothing, so a decision costs a few dictionary lookups (`bench/engine.py`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from ..model.permissions import (
    DENIAL_DISABLED,
    DENIAL_KEY_REVOKED,
    DENIAL_KEY_SCOPE,
    DENIAL_LEVEL,
    DENIAL_NOT_IN_AGENT,
    MAX_RISK,
    RISKS,
    can_run,
    required_for,
    scope_for,
    scopes_allow,
)
from .decision import ALLOW, Decision


class Principal(Protocol):
    """Who asks: `engine.principals.Principal`."""

    @property
    def name(self) -> str: ...
    @property
    def level(self) -> str: ...
    @property
    def categories(self) -> frozenset[str] | None: ...


class ToolFacts(Protocol):
    """What the policy reads of a tool: `engine.registry.ToolEntry`."""

    @property
    def name(self) -> str: ...
    @property
    def risk(self) -> str: ...
    @property
    def category(self) -> str: ...
    @property
    def enabled(self) -> bool: ...


class KeyState(Protocol):
    """The API key a call is made with, as last read: `engine.principals.ApiKey`."""

    @property
    def id(self) -> str: ...
    @property
    def revoked_at(self) -> datetime | None: ...
    @property
    def scopes(self) -> Collection[str]: ...


class Asking(Protocol):
    """How the call comes: `tools.base.CallContext` (or anything with these two attributes)."""

    @property
    def api_key(self) -> Any: ...
    @property
    def agent_tools(self) -> Sequence[str] | None: ...


class Rules(Protocol):
    """The operator's policy rules: asked after the fixed checks allow (they only narrow)."""

    @property
    def revision(self) -> str:
        """Names this set of rules (an approval granted under one revision admits only under it)."""
        ...

    def judge(
        self,
        principal: Principal,
        tool: ToolFacts,
        *,
        args: Mapping[str, Any] | None,
        context: Asking | None,
    ) -> Decision | None:
        """A `deny` or `approve` decision from the first matching rule, or None (no objection)."""
        ...


class Policy:
    """Decides, for listing and for calling alike; see the module docstring.

    `rules` may be swapped at run time (`use_rules`): a reload takes effect at the next decision.
    """

    __slots__ = ("rules",)

    def __init__(self, rules: Rules | None = None) -> None:
        self.rules = rules

    def use_rules(self, rules: Rules | None) -> None:
        """Decide with `rules` from now on (None: the fixed checks alone)."""
        self.rules = rules

    def decide(
        self,
        principal: Principal,
        tool: ToolFacts,
        *,
        args: Mapping[str, Any] | None = None,
        context: Asking | None = None,
        key: KeyState | None = None,
    ) -> Decision:
        """Whether `principal` may run `tool` (with `args`, when a call is being made).

        Args:
            principal: The caller.
            tool: The tool as the registry classified it.
            args: The call's arguments; None when a listing asks whether the caller could run it.
            context: How the call comes (its API key and the agent's tool list); None: a listing.
            key: The API key as just read again from the store, instead of `context.api_key`
                (the admission's re-check of a key revoked since the caller authenticated).

        Returns:
            `ALLOW`, a denial with its code, reason and what decided, or (from a rule) `approve`
            with its `terms`.
        """
        name = tool.name
        if not tool.enabled:
            return Decision("deny", f"tool '{name}' is disabled by the operator", DENIAL_DISABLED, "operator")
        agent_tools = context.agent_tools if context is not None else None
        if agent_tools is not None and name not in agent_tools:
            listed = ", ".join(sorted(agent_tools)) or "none"
            return Decision(
                "deny",
                f"tool '{name}' is not in the agent's tool list ({listed}): add it to configuration.tools",
                DENIAL_NOT_IN_AGENT,
                "agent",
            )
        level, risk = principal.level, tool.risk
        if not can_run(level, risk):
            user = principal.name
            if level not in MAX_RISK:
                return Decision("deny", f"user '{user}' has an unknown permission level {level!r}", DENIAL_LEVEL)
            needs = required_for(risk) if risk in RISKS else "a known risk"
            why = "view_only may only view executions; " if level == "view_only" else ""
            return Decision(
                "deny",
                f"user '{user}' ({level}) may not run '{name}' (risk {risk}): {why}requires {needs}",
                DENIAL_LEVEL,
            )
        if key is None and context is not None:
            key = context.api_key
        if key is not None:
            if key.revoked_at is not None:
                return Decision(
                    "deny", f"API key {key.id} was revoked; create a new one", DENIAL_KEY_REVOKED, "api_key"
                )
            if not scopes_allow(key.scopes or (), tool.category):
                has = ", ".join(sorted(key.scopes or ())) or "none"
                return Decision(
                    "deny",
                    f"API key {key.id} lacks scope '{scope_for(tool.category)}' for '{name}' "
                    f"(category {tool.category}; the key has: {has})",
                    DENIAL_KEY_SCOPE,
                    "api_key",
                )
        elif principal.categories is not None and tool.category not in principal.categories:
            scopes = ", ".join(sorted(scope_for(c) for c in principal.categories)) or "none"
            return Decision(
                "deny",
                f"the API key in use lacks scope '{scope_for(tool.category)}' for '{name}' "
                f"(category {tool.category}; the key has: {scopes})",
                DENIAL_KEY_SCOPE,
                "api_key",
            )
        rules = self.rules
        if rules is not None:
            judged = rules.judge(principal, tool, args=args, context=context)
            if judged is not None and judged.effect != "allow":
                return judged
        return ALLOW


__all__ = ["Asking", "KeyState", "Policy", "Principal", "Rules", "ToolFacts"]
