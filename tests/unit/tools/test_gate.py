"""The gate layer: level against risk, the agent's tool list, disabled tools, API keys; refusals recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolagent.engine.permissions import ExecutionDenied
from toolagent.status import CallStatus
from toolagent.tools.base import CallContext

from ._stack import rig

pytestmark = pytest.mark.anyio


async def test_a_tool_above_the_callers_level_is_denied_recorded_and_never_called(tmp_path: Path) -> None:
    async with rig(tmp_path, level="execute_basic") as r:
        r.stub.add("shell/exec", lambda a: "ran", risk="dangerous")
        outcome = await r.call("shell/exec", {"cmd": "ls"})
        record = await r.runtime.get_execution(outcome.execution_id or "", r.me)
    assert outcome.status is CallStatus.DENIED and outcome.denial == "level"
    assert isinstance(outcome.exception, ExecutionDenied)
    assert outcome.error == "user 'tester' (execute_basic) may not run 'shell/exec' (risk dangerous): requires admin"
    assert r.stub.calls == []
    assert (record.status, record.denied, record.denial) == ("failed", True, "level")


async def test_a_tool_outside_the_agents_list_is_denied(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        r.stub.add("file/read", lambda a: "x")
        outcome = await r.call("file/read", agent_tools=["file/list"])
    assert outcome.status is CallStatus.DENIED and outcome.denial == "not_in_agent"
    assert "add it to configuration.tools" in (outcome.error or "")


async def test_a_key_revoked_after_authentication_is_refused_at_admission(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        r.stub.add("file/read", lambda a: "x")
        key, _ = await r.runtime.principals.create_key(r.me.name)
        await r.runtime.principals.revoke_key(key.id)
        # The caller still holds the key as it was when it authenticated (active).
        outcome = await r.stack.call("file/read", {}, CallContext(r.me, api_key=key))
    assert outcome.status is CallStatus.DENIED and outcome.denial == "api_key_revoked"
    assert r.stub.calls == []


async def test_a_key_out_of_scope_is_denied(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        r.stub.add("shell/exec", lambda a: "x", risk="safe")
        key, _ = await r.runtime.principals.create_key(r.me.name, scopes=["agent:execute:file"])
        outcome = await r.stack.call("shell/exec", {}, CallContext(r.me, api_key=key))
    assert outcome.status is CallStatus.DENIED and outcome.denial == "api_key_scope"
