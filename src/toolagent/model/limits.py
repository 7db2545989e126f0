"""Where a caller's rate limit or budget stands: the record the limits answer with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

LimitKind = Literal["rate", "budget"]


@dataclass(frozen=True)
class LimitStatus:
    """Where one counter stands (rate-limit headers, `users usage`)."""

    kind: LimitKind
    """`rate` or `budget`."""
    scope: str
    """What it limits."""
    limit: int
    """Calls allowed per window."""
    used: int
    """Calls counted in the current window."""
    reset_in_s: float
    """Seconds until the window ends."""

    @property
    def remaining(self) -> int:
        """Calls left in the current window."""
        return max(0, self.limit - self.used)

    def to_json(self) -> dict[str, Any]:
        """CLI/API form."""
        return {
            "kind": self.kind,
            "scope": self.scope,
            "limit": self.limit,
            "used": self.used,
            "remaining": self.remaining,
            "resetInSeconds": round(self.reset_in_s, 3),
        }


__all__ = ["LimitKind", "LimitStatus"]
