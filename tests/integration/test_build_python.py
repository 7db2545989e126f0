"""`toolagent.build()` from Python goes through the same tool stack as a CLI build: gated as the
local user (or a principal passed in), recorded in history and audit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from _support.mcp_harness import probe_config, read_log, servers

from toolagent import build
from toolagent.agents import load_definition_text, record_from_definition
from toolagent.agents.loaders import LoadedAgent
from toolagent.engine import EngineConfig
from toolagent.engine.principals import local_user_name
from toolagent.runtime import Runtime
from toolagent.store import open_store

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


def _agent() -> LoadedAgent:
    text = yaml.safe_dump(
        {
            "metadata": {"name": "py-agent", "version": "1.0.0"},
            "configuration": {
                "tools": ["probe/echo", "probe/add"],
                "stopOnError": False,
                "toolParams": {"probe/echo": {"text": "hi"}, "probe/add": {"a": 1, "b": 2}},
            },
        }
    )
    defn = load_definition_text(text)
    return LoadedAgent(defn, record_from_definition(defn, text, org="tests"), "py-agent")


async def test_build_from_python_denies_a_tool_above_the_local_users_level(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TOOLAGENT_ENGINE_CONFIG", raising=False)
    log = tmp_path / "probe.log"
    db = f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"
    # The local user is created at execute_basic: it may run safe tools only.
    config = servers(probe=probe_config(log, risk={"echo": "safe", "add": "dangerous"}))
    with anyio.fail_after(60):
        outcome = await build(_agent(), db=db, servers=config)

    me = local_user_name()
    assert outcome.status == "failed"
    assert [(s.tool, s.status) for s in outcome.steps] == [("probe/echo", "success"), ("probe/add", "denied")]
    assert outcome.steps[1].error == (
        f"user '{me}' (execute_basic) may not run 'probe/add' (risk dangerous): requires admin"
    )
    # The denied step never reached the server.
    assert [e["tool"] for e in read_log(log) if e["event"] == "call"] == ["echo"]
    async with open_store(db) as store, Runtime(store, config=EngineConfig()) as runtime:
        principal = await runtime.principal()
        page = await runtime.history(principal, run_id=outcome.run_id)
        audit: list[Any] = [r async for r in runtime.audit.iter_records()]  # type: ignore[union-attr]
    assert principal.level == "execute_basic"
    assert sorted((e.tool, e.status, e.denied, e.denial) for e in page.executions) == [
        ("probe/add", "failed", True, "level"),
        ("probe/echo", "success", False, None),
    ]
    assert sorted((a.tool, a.event, a.decision, a.outcome) for a in audit) == sorted(
        [
            ("probe/add", "decision", "deny", "denied"),
            ("probe/echo", "decision", "allow", None),
            ("probe/echo", "outcome", None, "success"),
        ]
    )


async def test_build_from_python_runs_as_a_principal_passed_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLAGENT_ENGINE_CONFIG", raising=False)
    db = f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"
    async with open_store(db) as store, Runtime(store) as runtime:
        admin = await runtime.principals.add_user("ops", level="admin", plan="enterprise")
    config = servers(probe=probe_config(risk={"echo": "safe", "add": "dangerous"}))
    with anyio.fail_after(60):
        outcome = await build(_agent(), db=db, servers=config, principal=admin)
    assert outcome.ok, outcome.error
    assert outcome.steps[1].result is not None and outcome.steps[1].result.structured["value"] == 3.0
