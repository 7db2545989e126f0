"""The fix a denial suggests: rate an unrated server first, then the level change."""

from __future__ import annotations

from toolagent.engine.hints import denial_fix
from toolagent.errors import ExecutionDenied
from toolagent.model.permissions import DENIAL_LEVEL
from toolagent.policy.decision import Decision


def denied(risk: str = "dangerous", level: str = "execute_basic") -> ExecutionDenied:
    decision = Decision("deny", f"user 'ann' ({level}) may not run 'mine/write' (risk {risk})", DENIAL_LEVEL)
    return ExecutionDenied(decision, tool="mine/write", level=level, risk=risk)


def test_an_unrated_tool_leads_with_rating_its_server_in_the_config_file() -> None:
    fix = denial_fix(denied(), "ann", risk_source="default", config_file="/srv/mcp.json")
    assert fix is not None
    assert fix.startswith("rate the server: nobody rated 'mine/write', so it counts as dangerous")
    assert (
        """set "risk" on server 'mine' in /srv/mcp.json ("risk": "safe", "moderate", or per tool {"write": "safe"})"""
        in fix
    )
    rating, level = fix.index('"risk"'), fix.index("toolagent users set-level ann admin")
    assert rating < level


def test_a_tool_rated_by_the_operator_leads_with_the_level_change() -> None:
    fix = denial_fix(denied(), "ann", risk_source="operator", config_file="/srv/mcp.json")
    assert fix is not None and fix.startswith(
        "an admin can raise your level with `toolagent users set-level ann admin`"
    )
    assert 'set its "risk" in /srv/mcp.json' in fix
    # Where the risk came from is unknown (the HTTP API): the level change, then the rating.
    unknown = denial_fix(denied(), "ann")
    assert unknown is not None and unknown.startswith("an admin can raise your level")
