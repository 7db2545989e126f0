"""What a decision says: its effect, why, and which part of the policy made it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

Effect = Literal["allow", "deny", "approve"]


@dataclass(frozen=True, slots=True)
class ApprovalTerms:
    """What an `approve` decision asks of the approval that will admit the call."""

    rule: str
    """The id of the rule that asked for approval."""
    approver_level: str = "admin"
    """The least permission level that may decide the approval."""
    self_approval: bool = False
    """Whether the requester may decide their own call's approval."""
    expires_s: int = 900
    """How long a granted approval stays valid, in seconds (60..86400)."""
    revision: str = ""
    """The revision of the rules that asked (an approval admits a call only under the same revision)."""


@dataclass(frozen=True, slots=True)
class Decision:
    """The policy's verdict on one call, or on whether a caller could make it (listings)."""

    effect: Effect
    """`allow`: the call may go on to the limits; `deny`: refused; `approve`: it waits for a
    person allowed to approve it (`terms` says who and for how long)."""
    reason: str | None = None
    """Why not, as a sentence naming the user, level, tool, risk or scope and the fix; None when allowed."""
    code: str | None = None
    """Why not, as a short code (`level`, `api_key_scope`, ...: the denial metrics' label); None when allowed."""
    decided_by: str = "matrix"
    """What decided: `operator` (the tool is disabled), `agent` (its tool list), `matrix` (level
    against risk), `api_key` (revocation and scopes), `rule:<id>` (a policy rule)."""
    terms: ApprovalTerms | None = None
    """For `approve`: who may approve and for how long; None for the other effects."""

    @property
    def allowed(self) -> bool:
        """True when the call may go on."""
        return self.effect == "allow"


#: The one allow verdict (shared: the allow path allocates nothing).
ALLOW: Final = Decision("allow")

__all__ = ["ALLOW", "ApprovalTerms", "Decision", "Effect"]
