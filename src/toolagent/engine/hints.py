"""The fix for a refused call, worded once for the CLI and the HTTP API."""

from __future__ import annotations

from ..errors import ExecutionDenied
from ..model.permissions import DENIAL_DISABLED, DENIAL_LEVEL, levels_for


def denial_fix(
    exc: ExecutionDenied, user: str, *, risk_source: str | None = None, config_file: str | None = None
) -> str | None:
    """What would let `user` run the refused tool, or None when nothing in the config would.

    Args:
        exc: the gate's refusal.
        user: the name of the user who was refused.
        risk_source: where the tool's risk came from (`default` when no one rated it, as for a
            server of one's own); None when not known.
        config_file: the server config file that defines the tool's server, named in the fix.
    """
    if exc.denial == DENIAL_LEVEL and levels_for(exc.risk):
        server = exc.tool.partition("/")[0]
        where = config_file or "mcp.json"
        level_fix = f"an admin can raise your level with `toolagent users set-level {user} {levels_for(exc.risk)[0]}`"
        if risk_source == "default" and exc.level != "view_only":
            # Nobody rated this tool: it is dangerous only by default, and the fix is to rate it
            # (once, for every user), not to make this user an admin.
            return (
                f"rate the server: nobody rated '{exc.tool}', so it counts as dangerous; set \"risk\" on server "
                f'\'{server}\' in {where} ("risk": "safe", "moderate", or per tool {{"{exc.tool.partition("/")[2]}": '
                f'"safe"}}), or mark it "trusted": true so its own annotations (readOnlyHint) decide; '
                f"else {level_fix}"
            )
        fix = level_fix
        if exc.risk != "safe" and exc.level != "view_only":
            fix += (
                f', or, if {exc.risk} overstates the tool\'s risk, the operator can set its "risk" in {where} '
                'or mark its server "trusted": true so the server\'s own annotations (readOnlyHint) decide'
            )
        return fix
    if exc.denial == DENIAL_DISABLED:
        return f'enable it in the engine config (TOOLAGENT_ENGINE_CONFIG): tools: {{"{exc.tool}": {{enabled: true}}}}'
    return None


__all__ = ["denial_fix"]
