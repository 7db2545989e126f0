"""The fix for a refused call, worded once for the CLI and the HTTP API."""

from __future__ import annotations

from ..errors import ExecutionDenied
from ..model.permissions import DENIAL_DISABLED, DENIAL_LEVEL, levels_for


def denial_fix(exc: ExecutionDenied, user: str) -> str | None:
    """What would let `user` run the refused tool, or None when nothing in the config would.

    Args:
        exc: the gate's refusal.
        user: the name of the user who was refused.
    """
    if exc.denial == DENIAL_LEVEL and levels_for(exc.risk):
        fix = f"an admin can raise your level with `toolagent users set-level {user} {levels_for(exc.risk)[0]}`"
        if exc.risk != "safe" and exc.level != "view_only":
            fix += (
                f', or, if {exc.risk} overstates the tool\'s risk, the operator can set its "risk" in mcp.json '
                'or mark its server "trusted": true so the server\'s own annotations (readOnlyHint) decide'
            )
        return fix
    if exc.denial == DENIAL_DISABLED:
        return f'enable it in the engine config (TOOLAGENT_ENGINE_CONFIG): tools: {{"{exc.tool}": {{enabled: true}}}}'
    return None


__all__ = ["denial_fix"]
