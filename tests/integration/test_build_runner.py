"""BUILD runs over real MCP transports: our probe server (stdio and HTTP), server-everything and
server-filesystem from npm. Chaining, both modes, stopOnError both ways, routing errors, a server
lost mid-run, reconnection and process clean-up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from _support.mcp_harness import PROBE, http_probe, node_config, probe_config, processes_matching, read_log, servers

from toolagent.agents import load_definition_text, record_from_definition
from toolagent.agents.loaders import LoadedAgent
from toolagent.errors import DefinitionInvalid, UnknownTool, UsageError
from toolagent.mcp.config import ServersConfig
from toolagent.mcp.pool import ServerPool
from toolagent.runs import RunOutcome, plan_build
from toolagent.store import open_store
from toolagent.testing import test_runtime
from toolagent.tools.base import CallContext

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


def agent(configuration: dict[str, Any], name: str = "probe-agent") -> LoadedAgent:
    doc = {"metadata": {"name": name, "version": "1.2.3"}, "configuration": configuration}
    text = yaml.safe_dump(doc)
    defn = load_definition_text(text)
    return LoadedAgent(defn, record_from_definition(defn, text, org="tests"), name)


async def run_build(
    tmp_path: Path,
    config: ServersConfig,
    configuration: dict[str, Any],
    payload: dict[str, Any] | None = None,
    overrides: dict[str, Any] | None = None,
) -> tuple[RunOutcome, Any]:
    async with open_store(f"sqlite+aiosqlite:///{tmp_path / 'store.db'}") as store:
        plan = plan_build(agent(configuration), overrides)
        async with test_runtime(store, ServerPool(config)) as (runtime, me):
            with anyio.fail_after(60):
                outcome = await runtime.runner(CallContext(me), default_timeout_s=20).run(plan, payload)
        steps = await store.runs.get_steps(outcome.run_id)
        run_row = await store.runs.get_run(outcome.run_id)
        deliverable = await store.runs.get_deliverable(outcome.deliverable["id"])
    return outcome, (run_row, steps, deliverable)


async def test_sequential_chaining_by_reference_and_implicitly(tmp_path: Path, node_bin: Path) -> None:
    config = servers(probe=probe_config(), everything=node_config("mcp-server-everything", "stdio"))
    outcome, (run_row, steps, deliverable) = await run_build(
        tmp_path,
        config,
        {
            "tools": ["probe/make-number", "probe/double", "probe/echo", "everything/echo"],
            "toolParams": {
                "probe/make-number": {"value": "{{payload.start}}", "label": "start"},
                "probe/echo": {"text": "from {{steps['probe/make-number'].value}} to <<previous.value>>"},
                "everything/echo": {"message": "{{steps['probe/echo'].text}}"},
            },
        },
        payload={"start": 21},
    )
    assert outcome.status == "success", outcome.error
    assert [s.status for s in steps] == ["success"] * 4
    assert steps[1].params == {"value": 21.0}
    assert steps[1].param_sources == {"value": "previous:probe/make-number.value"}
    assert steps[1].result["structuredContent"] == {"value": 42.0, "doubled_from": 21.0}
    assert steps[2].params == {"text": "from 21.0 to 42.0"}
    assert steps[3].result["text"] == "Echo: from 21.0 to 42.0"
    md = deliverable.metadata
    assert md["toolsExecuted"] == 4 and md["successfulTools"] == 4 and md["failedTools"] == 0
    assert md["executionMode"] == "sequential" and md["stopOnError"] is True
    assert md["toolsUsed"] == ["probe/make-number", "probe/double", "probe/echo", "everything/echo"]
    assert md["runId"] == outcome.run_id and md["agent"] == {
        "organization": "tests",
        "slug": "probe-agent",
        "version": "1.2.3",
    }
    assert md["durationMs"] > 0 and md["startedAt"] <= md["endedAt"]
    assert run_row.status == "success" and run_row.deliverable_id == deliverable.id


async def test_type_of_single_reference_is_kept(tmp_path: Path) -> None:
    outcome, (_, steps, _) = await run_build(
        tmp_path,
        servers(probe=probe_config()),
        {
            "tools": ["probe/add"],
            "toolParams": {"probe/add": {"a": "{{payload.a}}", "b": "<<payload.b>>"}},
        },
        payload={"a": 2, "b": 3.5},
    )
    assert outcome.ok and steps[0].result["structuredContent"]["value"] == 5.5


async def test_stop_on_error_skips_later_steps(tmp_path: Path) -> None:
    outcome, (run_row, steps, deliverable) = await run_build(
        tmp_path,
        servers(probe=probe_config()),
        {
            "tools": ["probe/echo", "probe/fail", "probe/add"],
            "toolParams": {"probe/echo": {"text": "x"}, "probe/add": {"a": 1, "b": 2}},
        },
    )
    assert outcome.status == "failed" and run_row.status == "failed"
    assert [s.status for s in steps] == ["success", "failed", "skipped"]
    assert "deliberate failure" in steps[1].error
    assert deliverable.metadata["failedTools"] == 1 and deliverable.metadata["toolsExecuted"] == 2


async def test_without_stop_on_error_every_step_runs(tmp_path: Path) -> None:
    outcome, (_, steps, deliverable) = await run_build(
        tmp_path,
        servers(probe=probe_config()),
        {
            "tools": ["probe/fail", "probe/add"],
            "stopOnError": False,
            "toolParams": {"probe/add": {"a": 1, "b": 2}},
        },
    )
    assert outcome.status == "failed"
    assert [s.status for s in steps] == ["failed", "success"]
    assert deliverable.metadata["successfulTools"] == 1 and deliverable.metadata["failedTools"] == 1


async def test_parallel_fan_out_runs_concurrently(tmp_path: Path) -> None:
    log = tmp_path / "probe.log"
    tools = ["probe/sleep" for _ in range(1)] + ["probe/echo", "probe/add"]
    outcome, (_, steps, deliverable) = await run_build(
        tmp_path,
        servers(probe=probe_config(log)),
        {
            "tools": tools,
            "toolExecutionMode": "parallel",
            "toolParams": {
                "probe/sleep": {"seconds": 0.5, "tag": "s"},
                "probe/echo": {"text": "hi"},
                "probe/add": {"a": 1, "b": 1},
            },
        },
    )
    assert outcome.ok and deliverable.metadata["executionMode"] == "parallel"
    assert [s.status for s in steps] == ["success"] * 3
    # The quick steps finished while the slow one was still sleeping.
    assert steps[1].ended_at < steps[0].ended_at and steps[2].ended_at < steps[0].ended_at


async def test_parallel_stop_on_error_cancels_siblings(tmp_path: Path) -> None:
    log = tmp_path / "probe.log"
    outcome, (_, steps, _) = await run_build(
        tmp_path,
        servers(probe=probe_config(log)),
        {
            "tools": ["probe/sleep", "probe/fail"],
            "toolExecutionMode": "parallel",
            "toolParams": {"probe/sleep": {"seconds": 30, "tag": "long"}},
        },
    )
    assert outcome.status == "failed"
    assert [s.status for s in steps] == ["cancelled", "failed"]
    assert "probe/fail" in steps[0].error
    with anyio.fail_after(5):
        while not any(e["event"] == "cancelled" for e in read_log(log)):
            await anyio.sleep(0.05)


async def test_parallel_without_stop_on_error_keeps_every_result(tmp_path: Path) -> None:
    outcome, (_, steps, _) = await run_build(
        tmp_path,
        servers(probe=probe_config()),
        {
            "tools": ["probe/fail", "probe/echo"],
            "toolExecutionMode": "parallel",
            "stopOnError": False,
            "toolParams": {"probe/echo": {"text": "kept"}},
        },
    )
    assert [s.status for s in steps] == ["failed", "success"]
    assert steps[1].result["structuredContent"]["text"] == "kept"


async def test_unknown_namespace_names_the_server(tmp_path: Path) -> None:
    outcome, (_, steps, _) = await run_build(
        tmp_path,
        servers(probe=probe_config()),
        {
            "tools": ["nosuch/tool", "probe/echo"],
            "toolParams": {"probe/echo": {"text": "x"}},
        },
    )
    assert [s.status for s in steps] == ["failed", "skipped"]
    assert steps[0].error.startswith("MCP server is not available: nosuch")


async def test_unknown_tool_lists_the_servers_tools(tmp_path: Path) -> None:
    outcome, (_, steps, _) = await run_build(tmp_path, servers(probe=probe_config()), {"tools": ["probe/nope"]})
    assert "server 'probe' has no tool 'nope'" in steps[0].error
    assert "probe/echo" in steps[0].error and "probe/make-number" in steps[0].error


async def test_bad_arguments_name_the_field_and_never_reach_the_server(tmp_path: Path) -> None:
    log = tmp_path / "probe.log"
    outcome, (_, steps, _) = await run_build(
        tmp_path,
        servers(probe=probe_config(log)),
        {
            "tools": ["probe/add"],
            "toolParams": {"probe/add": {"a": "one", "b": 2}},
        },
    )
    assert outcome.status == "failed"
    assert "`a`: 'one' is not of type 'number'" in steps[0].error
    assert steps[0].error.endswith("; the tool was not called")
    assert not [e for e in read_log(log) if e["event"] == "call"]


async def test_a_template_giving_a_number_for_a_string_names_itself_and_the_string_filter(tmp_path: Path) -> None:
    log = tmp_path / "probe.log"
    outcome, (_, steps, _) = await run_build(
        tmp_path,
        servers(probe=probe_config(log)),
        {
            "tools": ["probe/add", "probe/echo"],
            "toolParams": {"probe/add": {"a": 1, "b": 2}, "probe/echo": {"text": "{{ steps['probe/add'].value }}"}},
        },
    )
    assert outcome.status == "failed"
    echo = steps[1]
    assert "`text`: 3.0 is not of type 'string'; the tool was not called" in echo.error
    assert (
        "`text` comes from the template '{{ steps['probe/add'].value }}', which gave the number 3.0: "
        "write '{{ steps['probe/add'].value | string }}' to pass it as text"
    ) in echo.error
    assert [e["tool"] for e in read_log(log) if e["event"] == "call"] == ["add"]


async def test_missing_template_reference_fails_the_step(tmp_path: Path) -> None:
    _, (_, steps, _) = await run_build(
        tmp_path,
        servers(probe=probe_config()),
        {
            "tools": ["probe/echo"],
            "toolParams": {"probe/echo": {"text": "{{payload.absent}}"}},
        },
    )
    assert steps[0].status == "failed" and "'payload.absent' is not set" in steps[0].error


async def test_streamable_http_server(tmp_path: Path) -> None:
    with http_probe() as url:
        outcome, (_, steps, _) = await run_build(
            tmp_path,
            servers(remote={"url": url}),
            {
                "tools": ["remote/make-number", "remote/double"],
                "toolParams": {"remote/make-number": {"value": 4}},
            },
        )
    assert outcome.ok, outcome.error
    assert steps[1].result["structuredContent"]["value"] == 8


async def test_filesystem_server_reads_a_file(tmp_path: Path, node_bin: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "note.txt").write_text("hello from disk")
    outcome, (_, steps, _) = await run_build(
        tmp_path,
        servers(fs=node_config("mcp-server-filesystem", str(root))),
        {
            "tools": ["fs/read_text_file"],
            "toolParams": {"fs/read_text_file": {"path": str(root / "note.txt")}},
        },
    )
    assert outcome.ok, outcome.error
    assert "hello from disk" in steps[0].result["text"]


async def test_server_lost_mid_run_fails_cleanly_and_next_run_reconnects(tmp_path: Path) -> None:
    log = tmp_path / "probe.log"
    config = servers(probe=probe_config(log))
    async with open_store(f"sqlite+aiosqlite:///{tmp_path / 'store.db'}") as store:
        async with test_runtime(store, ServerPool(config)) as (runtime, me):
            pool = runtime.pool
            runner = runtime.runner(CallContext(me), default_timeout_s=20)
            crash = plan_build(
                agent(
                    {
                        "tools": ["probe/echo", "probe/crash", "probe/add"],
                        "toolParams": {"probe/echo": {"text": "a"}, "probe/add": {"a": 1, "b": 1}},
                    }
                )
            )
            with anyio.fail_after(20):
                first = await runner.run(crash)
            assert first.status == "failed"
            assert [s.status for s in first.steps] == ["success", "failed", "skipped"]
            assert "closed the connection" in first.steps[1].error or "connection lost" in first.steps[1].error
            stored = await store.runs.get_steps(first.run_id)
            assert [s.status for s in stored] == ["success", "failed", "skipped"]
            again = plan_build(agent({"tools": ["probe/add"], "toolParams": {"probe/add": {"a": 2, "b": 3}}}))
            with anyio.fail_after(20):
                second = await runner.run(again)
            assert second.ok and second.steps[0].result.structured["value"] == 5
            assert pool.connects == 2
    pids = {e["pid"] for e in read_log(log)}
    assert len(pids) == 2
    assert processes_matching(str(PROBE)) == []


async def test_one_session_per_server_is_reused_across_runs(tmp_path: Path) -> None:
    config = servers(probe=probe_config())
    async with open_store(f"sqlite+aiosqlite:///{tmp_path / 'store.db'}") as store:
        async with test_runtime(store, ServerPool(config)) as (runtime, me):
            pool = runtime.pool
            runner = runtime.runner(CallContext(me))
            plan = plan_build(agent({"tools": ["probe/pid"]}))
            pids = {(await runner.run(plan)).steps[0].result.structured["value"] for _ in range(3)}
            assert len(pids) == 1 and pool.connects == 1
            assert len(processes_matching(str(PROBE))) == 1
    assert processes_matching(str(PROBE)) == []


async def test_cancelling_a_run_records_cancelled_steps(tmp_path: Path) -> None:
    log = tmp_path / "probe.log"
    async with open_store(f"sqlite+aiosqlite:///{tmp_path / 'store.db'}") as store:
        async with test_runtime(store, ServerPool(servers(probe=probe_config(log)))) as (runtime, me):
            runner = runtime.runner(CallContext(me))
            plan = plan_build(
                agent(
                    {
                        "tools": ["probe/sleep", "probe/echo"],
                        "toolParams": {"probe/sleep": {"seconds": 30}, "probe/echo": {"text": "x"}},
                    }
                )
            )
            result: list[RunOutcome] = []

            async def go() -> None:
                result.append(await runner.run(plan, run_id="run_cancel_me"))

            async with anyio.create_task_group() as tg:
                tg.start_soon(go)
                with anyio.fail_after(20):
                    while not any(e["event"] == "call" for e in read_log(log)):
                        await anyio.sleep(0.05)
                assert runner.cancel("run_cancel_me")
            [outcome] = result
            assert outcome.status == "cancelled"
            assert [s.status for s in outcome.steps] == ["cancelled", "cancelled"]
            assert (await store.runs.get_run("run_cancel_me")).status == "cancelled"
            assert (await store.runs.get_deliverable("run_cancel_me")).metadata["status"] == "cancelled"


def test_overrides_merge_and_are_validated() -> None:
    base = agent(
        {"tools": ["probe/echo", "probe/add"], "toolParams": {"probe/echo": {"text": "a"}, "probe/add": {"a": 1}}}
    )
    plan = plan_build(
        base, {"toolParams": {"probe/add": {"b": 2}}, "stopOnError": False, "toolExecutionMode": "parallel"}
    )
    assert plan.stop_on_error is False and plan.mode.value == "parallel"
    assert plan.steps[1].params.render({}) == {"a": 1, "b": 2}
    narrowed = plan_build(base, {"tools": ["probe/add"]})
    assert narrowed.tools == ("probe/add",)
    with pytest.raises(UsageError, match="did you mean 'stopOnError'"):
        plan_build(base, {"stopOnErrors": True})
    with pytest.raises(DefinitionInvalid, match="must include namespace"):
        plan_build(base, {"tools": ["echo"]})
    with pytest.raises(DefinitionInvalid, match="parallel steps cannot reference other steps"):
        plan_build(
            agent(
                {
                    "tools": ["probe/echo", "probe/add"],
                    "toolExecutionMode": "parallel",
                    "toolParams": {"probe/echo": {"text": "{{previous.value}}"}},
                }
            )
        )


async def test_tool_list_is_cached_and_refreshed_on_list_changed() -> None:
    async with ServerPool(servers(probe=probe_config())) as pool:
        before = {s.name for s in await pool.list_tools("probe")}
        assert "probe/late" not in before
        add = await pool.tool_spec("probe/add-tool")
        await pool.call(add, {"name": "late"})
        with anyio.fail_after(5):
            while True:
                try:
                    spec = await pool.tool_spec("probe/late")
                    break
                except UnknownTool:  # not listed until the notice arrives
                    await anyio.sleep(0.02)
        assert (await pool.call(spec, {})).text == "dynamic"
        assert pool.connects == 1


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("DELETE FROM users", "statement type DELETE is denied"),
        ("SELECT * FROM secrets", "table 'secrets' is not in allowed tables"),
        ("SELECT 1; DROP TABLE users", "statement"),
    ],
)
async def test_sql_guard_refuses_before_dispatch(tmp_path: Path, sql: str, reason: str) -> None:
    log = tmp_path / "probe.log"
    config = servers(probe=probe_config(log, sql_tools=["query"]))
    outcome, (_, steps, _) = await run_build(
        tmp_path,
        config,
        {
            "tools": ["probe/query", "probe/echo"],
            "toolParams": {"probe/echo": {"text": "after"}},
            "security": {"allowed_tables": ["users"]},
        },
        overrides={"toolParams": {"probe/query": {"sql": sql}}},
    )
    assert outcome.status == "failed"
    assert [s.status for s in steps] == ["failed", "skipped"]
    assert steps[0].error.startswith("SQL rejected:") and reason in steps[0].error
    assert not [e for e in read_log(log) if e.get("tool") == "query"]


async def test_sql_guard_lets_allowed_reads_through(tmp_path: Path) -> None:
    config = servers(probe=probe_config(sql_tools=["query"]))
    outcome, (_, steps, _) = await run_build(
        tmp_path,
        config,
        {
            "tools": ["probe/query"],
            "toolParams": {"probe/query": {"sql": "SELECT id FROM users LIMIT 5"}},
            "security": {"allowed_tables": ["users"]},
        },
    )
    assert outcome.ok and steps[0].result["structuredContent"]["text"] == "SELECT id FROM users LIMIT 5"
