"""The one decision: may this caller run this tool, and how? (`Policy.decide`)

Every asker calls it: the gate layer (with the arguments), the queued-call admission, the BUILD
pre-check, and every listing (`listTools`, `getToolDetails`, `toolagent tools list/show`), which
therefore show what the caller can really run. It is pure (no I/O): what needs the database (the
key re-read, counters) runs as admission checks inside the recorded transaction.
"""

from __future__ import annotations

from .decision import ALLOW, ApprovalTerms, Decision, Effect
from .policy import Asking, KeyState, Policy, Rules, ToolFacts

__all__ = ["ALLOW", "ApprovalTerms", "Asking", "Decision", "Effect", "KeyState", "Policy", "Rules", "ToolFacts"]
