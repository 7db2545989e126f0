"""The policy check of the admission: level against risk, the agent's tool list, disabled tools, API keys; refusals recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolagent.errors import ExecutionDenied
from toolagent.model.status import CallStatus
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


async def test_a_refused_callers_arguments_and_sql_are_not_examined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing of a caller's input is parsed on its behalf before the gate admits it: a refused
    # call is denied (and recorded) without its arguments or SQL ever being checked.
    import toolagent.tools.schema as schema_layer

    checked: list[str] = []
    real = schema_layer.check_arguments
    monkeypatch.setattr(
        schema_layer, "check_arguments", lambda spec, args: (checked.append(spec.name), real(spec, args))[1]
    )
    schema = {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]}
    async with rig(tmp_path, level="view_only") as r:
        r.stub.add("db/query", lambda a: "rows", input_schema=schema, takes_sql=True)
        outcome = await r.call("db/query", {"sql": 42})
    assert outcome.status is CallStatus.DENIED and outcome.denial == "level"
    assert checked == [] and r.stub.calls == []
