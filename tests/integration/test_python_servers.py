"""`python` servers of mcp.json (`tests/servers/python_tools.py`) inside real BUILD runs: the same
stack as MCP servers (execution records, audit rows, rate limits, a timeout that cancels the
function, a cancel by execution id), from `open_runtime` and from the `toolagent build` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from _support.repo import REPO_ROOT

from toolagent.agents import load_definition_text, record_from_definition
from toolagent.agents.loaders import LoadedAgent
from toolagent.engine import EngineConfig
from toolagent.errors import ServerConfigError
from toolagent.runs import RunOutcome, plan_build
from toolagent.runtime import Runtime, open_runtime
from toolagent.testing import UNLIMITED
from toolagent.tools.base import CallContext

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

SERVERS_DIR = REPO_ROOT / "tests" / "servers"
TOOLAGENT = Path(sys.executable).parent / "toolagent"
#: mcp.json: the three kinds of target, rated by the operator.
MCP_JSON: dict[str, Any] = {
    "mcpServers": {
        "text": {
            "python": "python_tools:TOOLS",
            "risk": {"word_count": "safe", "echo": "safe", "explode": "safe", "hold": "safe", "hang": "safe"},
            "category": "memory",
            "tool_timeouts_s": {"hang": 1},
        },
        "notes": {"python": "python_tools:notes", "risk": "moderate"},
        "made": {"python": "python_tools:make_tools", "risk": "safe"},
    }
}


@pytest.fixture
def tools_module(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(SERVERS_DIR))
    import python_tools

    python_tools.STATE = python_tools.State()
    return python_tools


def write_servers(tmp_path: Path, data: dict[str, Any] = MCP_JSON) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(data))
    return path


def agent(configuration: dict[str, Any]) -> LoadedAgent:
    text = yaml.safe_dump({"metadata": {"name": "py-tools", "version": "1.0.0"}, "configuration": configuration})
    definition = load_definition_text(text)
    return LoadedAgent(definition, record_from_definition(definition, text, org="tests"), "py-tools")


def slow_clock() -> Callable[[], float]:
    """Wall time that moves a thousand times slower from the start of a minute: every call of a
    test falls in one rate window, whenever the test runs."""
    start = time.time()
    base = start - start % 60 + 1

    def now() -> float:
        return base + (time.time() - start) / 1000

    return now


async def run(
    tmp_path: Path, configuration: dict[str, Any], *, engine: dict[str, Any] | None = None, during: Any = None
) -> tuple[RunOutcome, Runtime, Any]:
    """One BUILD as an admin; `during(runtime, me)` runs beside it. Returns the outcome, the runtime's
    history of the run and its audit records (read after the run, the runtime still open)."""
    db = f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"
    config = EngineConfig.from_data(engine or UNLIMITED)
    async with open_runtime(db, str(write_servers(tmp_path)), config=config, clock=slow_clock()) as runtime:
        me = await runtime.principals.add_user("ops", level="admin", plan="enterprise")
        plan = plan_build(agent(configuration))
        await runtime.catalogue.refresh(list(dict.fromkeys(t.partition("/")[0] for t in plan.tools)))
        outcome: RunOutcome | None = None

        async def build() -> None:
            nonlocal outcome
            outcome = await runtime.runner(CallContext(me)).run(plan)

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(build)
                if during is not None:
                    await during(runtime, me)
        assert outcome is not None
        page = await runtime.history(me, run_id=outcome.run_id)
        assert runtime.audit is not None
        audit = await runtime.audit.query(run_id=outcome.run_id, limit=1000)
    return outcome, page.executions, audit


async def test_functions_a_server_object_and_a_factory_run_a_build_recorded_and_audited(
    tmp_path: Path, tools_module: Any
) -> None:
    outcome, executions, audit = await run(
        tmp_path,
        {
            "tools": ["text/word_count", "text/echo", "notes/add_note", "made/shout", "text/explode"],
            "stopOnError": False,
            "toolParams": {
                "text/word_count": {"text": "a b a c", "unique": True},
                "text/echo": {"text": "{{steps['text/word_count'].words}} words"},
                "notes/add_note": {"text": "<<previous.result>>"},
                "made/shout": {"text": "hi"},
            },
        },
    )
    steps = {s.tool: s for s in outcome.steps}
    assert [(s.tool, s.status) for s in outcome.steps] == [
        ("text/word_count", "success"),
        ("text/echo", "success"),
        ("notes/add_note", "success"),
        ("made/shout", "success"),
        ("text/explode", "failed"),
    ]
    # A sync function's dict is structured content; later steps read it.
    assert steps["text/word_count"].result is not None
    assert steps["text/word_count"].result.structured == {"words": 3}
    assert steps["notes/add_note"].result is not None and steps["notes/add_note"].result.text == "noted: 3 words"
    assert steps["made/shout"].result is not None and steps["made/shout"].result.text == "HI"
    # The function's exception is the tool's failed answer, recorded with its message.
    assert steps["text/explode"].error is not None and "ValueError: exploded on purpose" in steps["text/explode"].error
    by_tool = {e.tool: e for e in executions}
    assert {t: (e.status, e.risk, e.category) for t, e in by_tool.items()} == {
        "text/word_count": ("success", "safe", "memory"),
        "text/echo": ("success", "safe", "memory"),
        "notes/add_note": ("success", "moderate", "agent"),
        "made/shout": ("success", "safe", "agent"),
        "text/explode": ("failed", "safe", "memory"),
    }
    assert by_tool["text/word_count"].arguments == {"text": "a b a c", "unique": True}
    assert sorted((a.tool, a.event, a.decision, a.outcome) for a in audit) == sorted(
        [(tool, "decision", "allow", None) for tool in by_tool]
        + [(tool, "outcome", None, e.status) for tool, e in by_tool.items()]
    )
    assert {a.execution_id for a in audit} == {e.id for e in executions}


async def test_a_rate_limit_counts_python_tool_calls(tmp_path: Path, tools_module: Any) -> None:
    outcome, executions, audit = await run(
        tmp_path,
        {
            "tools": ["text/echo", "made/shout", "text/word_count"],
            "stopOnError": False,
            "toolParams": {"text/echo": {"text": "a"}, "made/shout": {"text": "b"}, "text/word_count": {"text": "c"}},
        },
        engine={"plans": {"enterprise": {"rate_per_minute": 2}}},
    )
    assert [s.status for s in outcome.steps] == ["success", "success", "denied"]
    assert "rate limit" in (outcome.steps[2].error or "")
    denied = [e for e in executions if e.denied]
    assert [(e.tool, e.denial) for e in denied] == [("text/word_count", "rate_limited")]
    assert ("text/word_count", "deny") in {(a.tool, a.decision) for a in audit if a.event == "decision"}


async def test_a_timeout_cancels_the_async_function_and_is_recorded(tmp_path: Path, tools_module: Any) -> None:
    outcome, executions, _ = await run(
        tmp_path,
        {"tools": ["text/hang", "text/echo"], "stopOnError": False, "toolParams": {"text/echo": {"text": "after"}}},
    )
    # A timed-out step fails the run (as an MCP tool's does); its execution is recorded cancelled.
    assert [(s.tool, s.status) for s in outcome.steps] == [("text/hang", "failed"), ("text/echo", "success")]
    assert outcome.steps[0].error == "tool 'text/hang' timed out after 1 s"
    # The cancellation reached the function where it awaited.
    assert tools_module.STATE.cancelled == ["hang"]
    hang = next(e for e in executions if e.tool == "text/hang")
    assert (hang.status, hang.reason, hang.timeout_ms) == ("cancelled", "timeout after 1000 ms", 1000)


async def test_a_running_python_tool_is_cancelled_by_its_execution_id(tmp_path: Path, tools_module: Any) -> None:
    tools_module.STATE.entered = anyio.Event()
    cancelled_ids: list[str] = []

    async def cancel_it(runtime: Runtime, me: Any) -> None:
        await tools_module.STATE.entered.wait()
        (running,) = await runtime.active(me)
        assert running.tool == "text/hold"
        cancelled_ids.append((await runtime.cancel(running.id, me)).id)

    outcome, executions, audit = await run(
        tmp_path, {"tools": ["text/hold", "text/echo"], "toolParams": {"text/echo": {"text": "x"}}}, during=cancel_it
    )
    assert outcome.status == "cancelled"
    assert outcome.steps[0].status == "cancelled"
    assert tools_module.STATE.cancelled == ["hold"]
    hold = next(e for e in executions if e.tool == "text/hold")
    assert hold.id == cancelled_ids[0] and hold.status == "cancelled"
    assert ("text/hold", "outcome", "cancelled") in {(a.tool, a.event, a.outcome) for a in audit}


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_such_module_here:TOOLS", "server 'bad': no module named 'no_such_module_here': install the package"),
        ("python_tools:MISSING", "server 'bad': module 'python_tools' has no attribute 'MISSING'"),
        ("python_tools:NOT_TOOLS", "it must be an MCPServer, a non-empty list of functions"),
        ("python_tools:needs_arguments", "takes arguments; a factory takes none"),
    ],
)
async def test_a_python_server_that_cannot_load_names_the_server_and_the_fix(
    tmp_path: Path, tools_module: Any, target: str, message: str
) -> None:
    path = write_servers(tmp_path, {"mcpServers": {"bad": {"python": target}}})
    with pytest.raises(ServerConfigError) as info:
        async with open_runtime(f"sqlite+aiosqlite:///{tmp_path / 'store.db'}", str(path)):
            pass
    assert message in info.value.message
    assert "mcpServers.bad.python" in info.value.message
    # Nothing was opened: the store file was never created.
    assert not (tmp_path / "store.db").exists()


def test_toolagent_build_runs_a_python_server_from_mcp_json(tmp_path: Path) -> None:
    servers = write_servers(tmp_path)
    definition = tmp_path / "agent.yaml"
    definition.write_text(
        yaml.safe_dump(
            {
                "metadata": {"name": "py-tools"},
                "configuration": {
                    "tools": ["text/word_count", "notes/add_note"],
                    "toolParams": {"text/word_count": {"text": "one two"}, "notes/add_note": {"text": "x"}},
                },
            }
        )
    )
    db = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SERVERS_DIR), os.environ.get("PYTHONPATH", "")]),
        "TOOLAGENT_ENGINE_CONFIG": "",
        "TOOLAGENT_USER": "",
    }
    env = {k: v for k, v in env.items() if v != ""}
    subprocess.run(
        [str(TOOLAGENT), "--db", db, "users", "add", "ops", "--level", "admin"], env=env, check=True, timeout=60
    )
    done = subprocess.run(
        [str(TOOLAGENT), "--db", db, "--servers", str(servers), "--user", "ops", "--json", "build", str(definition)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)["deliverable"]["data"]["results"]
    assert [(r["tool"], r["status"]) for r in results] == [
        ("text/word_count", "success"),
        ("notes/add_note", "success"),
    ]
    history = subprocess.run(
        [str(TOOLAGENT), "--db", db, "--user", "ops", "--json", "history"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    rows = json.loads(history.stdout)["executions"]
    assert sorted((r["toolName"], r["status"]) for r in rows) == [
        ("notes/add_note", "success"),
        ("text/word_count", "success"),
    ]
    audit = subprocess.run(
        [str(TOOLAGENT), "--db", db, "audit", "verify"], env=env, capture_output=True, text=True, timeout=60
    )
    assert audit.returncode == 0, audit.stdout + audit.stderr


def test_loading_the_config_imports_no_python_server(tmp_path: Path) -> None:
    # Loading and validating the file imports nothing: the module does not exist.
    from toolagent.mcp.config import ServersConfig

    path = write_servers(tmp_path, {"mcpServers": {"later": {"python": "not_imported_yet:TOOLS"}}})
    assert ServersConfig.load(str(path)).mcpServers["later"].transport == "python"
    assert "not_imported_yet" not in sys.modules


def test_a_function_server_is_listed_and_called_over_rest_and_trpc(tmp_path: Path) -> None:
    from _support.api_harness import live_server, provision

    db = f"sqlite+aiosqlite:///{tmp_path / 'api.db'}"
    users = provision(db, [("bob", "execute_basic", "enterprise")])
    env = {"PYTHONPATH": os.pathsep.join([str(SERVERS_DIR), os.environ.get("PYTHONPATH", "")])}
    with live_server(tmp_path, MCP_JSON["mcpServers"], db=db, env=env) as server, server.client(users["bob"]) as bob:
        assert "text" in bob.get("/ready").json()["servers"]
        listed = {t["name"]: t["runnable"] for t in bob.get("/api/tools").json()["tools"]}
        assert listed["text/word_count"] is True and listed["notes/add_note"] is False  # moderate, basic user
        rest = bob.post("/api/tools/execute", json={"name": "text/word_count", "arguments": {"text": "a b a"}})
        assert rest.status_code == 200, rest.text
        assert rest.json()["result"]["structuredContent"] == {"words": 3}
        trpc = bob.post("/trpc/tools.executeTool", json={"name": "text/echo", "arguments": {"text": "hi"}})
        assert trpc.status_code == 200, trpc.text
        assert trpc.json()["result"]["data"]["result"]["structuredContent"] == {"result": "hi"}
