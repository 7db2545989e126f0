"""Engine.execute: the gate matrix end to end (single calls and BUILD steps), outcomes, timeouts against a
real in-process MCP server, cancellation by id (this engine and another one on the same store), the
caller's own cancellation, runs, visibility, orphaned executions, audit and events."""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

from toolagent.engine import Engine, EngineConfig, ExecutionDenied, Principal
from toolagent.engine.audit import AuditLog
from toolagent.engine.events import Event
from toolagent.errors import NotFound, ToolCallError, UpstreamError, UsageError
from toolagent.model.execution import Execution
from toolagent.model.redaction import REDACTED
from toolagent.model.spec import ToolResult, ToolSpec
from toolagent.store import open_store
from toolagent.store.executions import Owner

pytestmark = pytest.mark.anyio

LEVELS = ("view_only", "execute_basic", "execute_advanced", "admin")
RISKS = ("safe", "moderate", "dangerous")
ALLOWED = {
    ("execute_basic", "safe"),
    ("execute_advanced", "safe"),
    ("execute_advanced", "moderate"),
    ("admin", "safe"),
    ("admin", "moderate"),
    ("admin", "dangerous"),
}
REQUIRES = {
    "safe": "execute_basic, execute_advanced or admin",
    "moderate": "execute_advanced or admin",
    "dangerous": "admin",
}
OK = ToolResult(False, {"ok": True}, [{"type": "text", "text": "ok"}], "ok")


def spec(name: str = "fs/read", *, risk: str | None = "safe", category: str | None = "file", **kw: Any) -> ToolSpec:
    server, _, tool = name.partition("/")
    return ToolSpec(name=name, server=server, tool=tool, risk=risk, category=category, **kw)


class Calls:
    """An `invoke` that counts calls and answers `result` (or raises `error`)."""

    def __init__(self, result: ToolResult = OK, error: BaseException | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.result, self.error = result, error

    async def __call__(self, arguments: dict[str, Any]) -> ToolResult:
        self.calls.append(arguments)
        if self.error is not None:
            raise self.error
        return self.result


class Blocker:
    """An `invoke` that blocks until cancelled, telling the test when it started and when it was cancelled."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.cancelled = anyio.Event()

    async def __call__(self, arguments: dict[str, Any]) -> ToolResult:
        self.started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.cancelled.set()
            raise
        raise AssertionError("unreachable")


@contextlib.asynccontextmanager
async def engine_on(url: str, **kw: Any) -> AsyncIterator[Engine]:
    async with open_store(url) as store, Engine(store, **kw) as engine:
        yield engine


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"


async def user(engine: Engine, name: str, level: str, plan: str = "enterprise") -> Principal:
    return await engine.principals.add_user(name, level=level, plan=plan)


def recorder(engine: Engine) -> list[Event]:
    events: list[Event] = []
    engine.events.subscribe(events.append)
    return events


@pytest.mark.parametrize("agent_tools", [None, "listed", "unlisted"])
@pytest.mark.parametrize("risk", RISKS)
@pytest.mark.parametrize("level", LEVELS)
async def test_gate_matrix(sqlite_url: str, level: str, risk: str, agent_tools: str | None) -> None:
    tools = {None: None, "listed": ["fs/other", "fs/read"], "unlisted": ["fs/other"]}[agent_tools]
    async with engine_on(sqlite_url) as engine:
        me = await user(engine, "bob", level)
        events = recorder(engine)
        invoke = Calls()
        allowed = (level, risk) in ALLOWED and agent_tools != "unlisted"
        if allowed:
            execution = await engine.execute(
                spec(risk=risk), {"path": "/a"}, me, invoke, agent_tools=tools, run_id="run_1"
            )
            assert execution.status == "success" and execution.result == OK and len(invoke.calls) == 1
            assert [e.type for e in events] == ["execution_started", "execution_finished"]
            return
        with pytest.raises(ExecutionDenied) as info:
            await engine.execute(spec(risk=risk), {"path": "/a"}, me, invoke, agent_tools=tools, run_id="run_1")
        assert invoke.calls == []
        exc = info.value
        assert exc.code == "FORBIDDEN"
        if agent_tools == "unlisted":
            assert exc.denial == "not_in_agent"
            assert (
                exc.message
                == "tool 'fs/read' is not in the agent's tool list (fs/other): add it to configuration.tools"
            )
        else:
            assert exc.denial == "level"
            assert exc.message.startswith(f"user 'bob' ({level}) may not run 'fs/read' (risk {risk}): ")
            assert exc.message.endswith(f"requires {REQUIRES[risk]}")
        stored = await engine.get_execution(exc.execution_id or "", me)
        assert (stored.status, stored.denied, stored.denial, stored.reason) == ("failed", True, exc.denial, exc.message)
        assert stored.run_id == "run_1" and stored.duration_ms is None
        [row] = await AuditLog(engine.db).query(execution_id=stored.id)
        assert (row.decision, row.outcome, row.reason, row.level, row.risk) == (
            "deny",
            "denied",
            exc.message,
            level,
            risk,
        )
        assert [e.type for e in events] == ["execution_denied"] and events[0].reason == exc.message


async def test_outcomes_and_audit(db_url: str) -> None:
    async with engine_on(db_url) as engine:
        me = await user(engine, "bob", "admin")
        ok = await engine.execute(
            spec(),
            {"path": "/a", "password": "hunter2"},
            me,
            Calls(),
            session_id="s1",
            metadata={"trace": "t1", "api_key": "sk_live_abcdefghijklmnopqrstu"},
        )
        assert ok.status == "success" and ok.duration_ms is not None and ok.ended_at is not None
        stored = await engine.get_execution(ok.id, me)
        assert stored.arguments == {"path": "/a", "password": REDACTED}
        assert stored.metadata == {"trace": "t1", "api_key": REDACTED} and stored.session_id == "s1"
        assert stored.result == OK and stored.timeout_ms == 30000
        assert ok.id.startswith("exec_") and len(ok.id.split("_")) == 3
        rows = await AuditLog(engine.db).query(execution_id=ok.id)
        assert [(r.event, r.decision, r.outcome) for r in rows] == [
            ("decision", "allow", None),
            ("outcome", None, "success"),
        ]
        assert rows[0].arguments == {"path": "/a", "password": REDACTED}

        reported = ToolResult(True, None, [{"type": "text", "text": "no such file"}], "no such file")
        failed = await engine.execute(spec(), {}, me, Calls(reported))
        assert (failed.status, failed.error, failed.result) == ("failed", "no such file", reported)

        broken = await engine.execute(spec(), {}, me, Calls(error=UpstreamError("connection lost")))
        assert (broken.status, broken.error, broken.result) == ("failed", "connection lost", None)

        with pytest.raises(ZeroDivisionError):
            await engine.execute(spec(), {}, me, Calls(error=ZeroDivisionError("bug")))
        [last] = (await engine.history(me, limit=1)).executions
        assert last.status == "failed" and last.error == "internal error: ZeroDivisionError: bug"
        assert await engine.active(me) == []


#: An environment-style mapping a tool answers: secrets whose keys name them only in their words
#: (not their ends), and a value given away only by its form under a harmless key.
ENV_SECRETS = {
    "SECRET_TOKEN_IN_ENV": "plain-value-0001",
    "password2": "plain-value-0002",
    "apiKey2": "plain-value-0003",
    "DEPLOY_NOTE": "rotate AKIAIOSFODNN7EXAMPLE soon",
    "CALLBACK": "https://app:plain-value-0004@hooks.internal/x",
}
ENV_CLEAR = ("plain-value-000", "AKIAIOSFODNN7EXAMPLE")


async def test_secrets_in_an_environment_mapping_are_masked_where_stored_and_answered(db_url: str) -> None:
    env_text = " ".join(f"{k}={v!r}" for k, v in ENV_SECRETS.items())
    answer = ToolResult(False, {"env": ENV_SECRETS}, [{"type": "text", "text": env_text}], env_text)
    async with engine_on(db_url) as engine:
        me = await user(engine, "bob", "admin")
        done = await engine.execute(spec(), {"env": ENV_SECRETS}, me, Calls(answer))
        assert done.status == "success"
        stored = await engine.get_execution(done.id, me)
        [listed] = (await engine.history(me, limit=1)).executions
        audit = await AuditLog(engine.db).query(execution_id=done.id)
    # The direct answer is masked as the stored record is: no option shows it in clear.
    for shown in (done, stored, listed):
        text = repr((shown.arguments, shown.result))
        assert [c for c in ENV_CLEAR if c in text] == [], text
        assert shown.result is not None and shown.result.structured is not None
        assert shown.result.structured["env"]["SECRET_TOKEN_IN_ENV"] == REDACTED
    assert [c for c in ENV_CLEAR if c in repr([r.arguments for r in audit])] == []


async def test_timeout_bounds(sqlite_url: str) -> None:
    async with engine_on(sqlite_url, config=EngineConfig(default_timeout_ms=4000)) as engine:
        me = await user(engine, "bob", "admin")
        for bad in (999, 300_001, 0):
            with pytest.raises(UsageError, match=f"timeout must be between 1000 and 300000 ms \\(got {bad}\\)"):
                await engine.execute(spec(), {}, me, Calls(), timeout_ms=bad)
        assert (await engine.execute(spec(), {}, me, Calls())).timeout_ms == 4000
        assert (await engine.execute(spec(timeout_s=12), {}, me, Calls())).timeout_ms == 12000
        assert (await engine.execute(spec(timeout_s=0.2), {}, me, Calls())).timeout_ms == 1000
        assert (await engine.execute(spec(timeout_s=12), {}, me, Calls(), timeout_ms=2000)).timeout_ms == 2000


def sleepy_server() -> tuple[MCPServer, anyio.Event]:
    server = MCPServer("sleepy", log_level="WARNING")
    cancelled = anyio.Event()

    @server.tool(name="sleep")
    async def sleep(seconds: float) -> str:
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise
        return "slept"

    return server, cancelled


def mcp_invoke(client: Client, tool: str) -> Any:
    async def invoke(arguments: dict[str, Any]) -> ToolResult:
        r = await client.call_tool(tool, arguments)
        content = [c.model_dump(exclude_none=True) for c in r.content]
        text = "\n".join(c.get("text", "") for c in content if c.get("type") == "text")
        return ToolResult(bool(r.is_error), r.structured_content, content, text)

    return invoke


async def test_timeout_abandons_the_call_and_the_server_sees_the_cancellation(sqlite_url: str) -> None:
    server, cancelled = sleepy_server()
    async with engine_on(sqlite_url) as engine, Client(server) as client:
        me = await user(engine, "bob", "admin")
        invoke = mcp_invoke(client, "sleep")
        quick = await engine.execute(spec("sleepy/sleep"), {"seconds": 0.01}, me, invoke, timeout_ms=5000)
        assert quick.status == "success" and quick.result is not None and quick.result.structured == {"result": "slept"}

        with anyio.fail_after(10):  # a hang guard: the 30 s call is abandoned at its timeout
            execution = await engine.execute(spec("sleepy/sleep"), {"seconds": 30}, me, invoke, timeout_ms=1000)
        assert execution.status == "cancelled"
        assert execution.reason == "timeout after 1000 ms"
        assert execution.error == "tool 'sleepy/sleep' timed out after 1000 ms"
        assert execution.duration_ms is not None
        with anyio.fail_after(5):
            await cancelled.wait()
        stored = await engine.get_execution(execution.id, me)
        assert (stored.status, stored.reason, stored.duration_ms) == (
            "cancelled",
            execution.reason,
            execution.duration_ms,
        )
        # The session is still usable after the abandoned call.
        assert (await engine.execute(spec("sleepy/sleep"), {"seconds": 0}, me, invoke)).status == "success"


async def run_in_background(engine: Engine, principal: Principal, invoke: Any, results: list[Any], **kw: Any) -> None:
    try:
        results.append(await engine.execute(spec(), {}, principal, invoke, **kw))
    except Exception as exc:  # noqa: BLE001 - the test inspects it
        results.append(exc)


async def test_cancel_by_id_in_process_and_visibility(db_url: str) -> None:
    async with engine_on(db_url) as engine:
        bob = await user(engine, "bob", "execute_basic")
        carol = await user(engine, "carol", "execute_advanced")
        root = await user(engine, "root", "admin")
        events = recorder(engine)
        blocker, results = Blocker(), []
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_in_background, engine, bob, blocker, results)
            with anyio.fail_after(5):
                await blocker.started.wait()
            [running] = await engine.active(bob)
            assert running.status == "running" and running.running_time_ms(datetime.now(UTC)) >= 0
            assert [e.id for e in await engine.active(root)] == [running.id]
            assert await engine.active(carol) == []
            for op in (engine.get_execution, engine.cancel):
                with pytest.raises(NotFound, match=f"execution '{running.id}' not found"):
                    await op(running.id, carol)
            assert (await engine.get_execution(running.id, root)).user == "bob"
            outcome: list[Execution] = []

            async def cancel() -> None:
                outcome.append(await engine.cancel(running.id, bob))

            tg.start_soon(cancel)
            with anyio.fail_after(5):
                await blocker.cancelled.wait()
        [done] = outcome
        assert (done.status, done.reason) == ("cancelled", "cancelled by bob")
        assert results[0].status == "cancelled" and results[0].reason == "cancelled by bob"
        assert [e.type for e in events] == ["execution_started", "execution_cancelled"]
        with pytest.raises(UsageError, match="is not running"):
            await engine.cancel(running.id, bob)
        with pytest.raises(NotFound):
            await engine.get_execution("exec_0_nope", root)


async def test_cancel_from_another_engine_on_the_same_store(db_url: str) -> None:
    async with (
        engine_on(db_url, config=EngineConfig(cancel_poll_ms=100)) as first,
        engine_on(db_url, config=EngineConfig(cancel_poll_ms=100)) as second,
    ):
        bob = await user(first, "bob", "execute_basic")
        root = await user(first, "root", "admin")
        blocker, results = Blocker(), []
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_in_background, first, bob, blocker, results)
            with anyio.fail_after(5):
                await blocker.started.wait()
            [running] = await second.active(root)
            with anyio.fail_after(5):
                done = await second.cancel(running.id, root)
        assert blocker.cancelled.is_set()
        assert (done.status, done.reason) == ("cancelled", "cancelled by root")
        assert results[0].reason == "cancelled by root"


async def test_caller_cancellation_is_recorded_and_propagates(sqlite_url: str) -> None:
    async with engine_on(sqlite_url) as engine:
        bob = await user(engine, "bob", "admin")
        blocker, results = Blocker(), []
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_in_background, engine, bob, blocker, results)
            with anyio.fail_after(5):
                await blocker.started.wait()
            tg.cancel_scope.cancel()
        assert results == []  # the cancellation went on through execute
        [row] = (await engine.history(bob)).executions
        assert (row.status, row.reason) == ("cancelled", "cancelled: the calling task was cancelled")
        assert row.ended_at is not None and row.duration_ms is not None


async def test_cancel_run_cancels_its_steps_and_later_steps(db_url: str) -> None:
    async with engine_on(db_url) as engine:
        bob = await user(engine, "bob", "admin")
        carol = await user(engine, "carol", "admin")
        dave = await user(engine, "dave", "execute_basic")
        blockers, results = [Blocker(), Blocker()], []
        async with anyio.create_task_group() as tg:
            for b in blockers:
                tg.start_soon(functools.partial(run_in_background, engine, bob, b, results, run_id="run_x"))
            with anyio.fail_after(5):
                for b in blockers:
                    await b.started.wait()
            assert await engine.cancel_run("run_x", dave) == []  # not dave's run
            with anyio.fail_after(5):
                ids = await engine.cancel_run("run_x", carol)
        assert len(ids) == 2 and all(b.cancelled.is_set() for b in blockers)
        assert sorted(r.reason for r in results) == ["cancelled by carol"] * 2
        later = Calls()
        step = await engine.execute(spec(), {}, bob, later, run_id="run_x")
        assert (step.status, step.reason, later.calls) == ("cancelled", "run run_x was cancelled by carol", [])
        other = await engine.execute(spec(), {}, bob, Calls(), run_id="run_y")
        assert other.status == "success"


async def test_api_keys_in_the_gate(sqlite_url: str) -> None:
    async with engine_on(sqlite_url) as engine:
        bob = await user(engine, "bob", "admin")
        key, raw = await engine.principals.create_key("bob", scopes=["agent:execute:file"])
        principal, authed = await engine.principals.authenticate_key(raw)
        assert (principal.name, principal.level) == (bob.name, bob.level) and authed.id == key.id
        assert principal.categories == frozenset({"file"})  # the key's scopes narrow what it sees
        assert (await engine.execute(spec(), {}, principal, Calls(), api_key=authed)).api_key_id == key.id
        invoke = Calls()
        with pytest.raises(ExecutionDenied) as info:
            await engine.execute(
                spec("sh/run", category="shell", risk="dangerous"), {}, principal, invoke, api_key=authed
            )
        assert info.value.denial == "api_key_scope" and invoke.calls == []
        await engine.principals.revoke_key(key.id)
        # The key object the caller holds is stale: the engine checks the store.
        with pytest.raises(ExecutionDenied, match=f"API key {key.id} was revoked") as info:
            await engine.execute(spec(), {}, principal, invoke, api_key=authed)
        assert info.value.denial == "api_key_revoked" and invoke.calls == []


async def test_disabled_tool_is_denied(sqlite_url: str) -> None:
    config = EngineConfig.from_data({"tools": {"fs/*": {"enabled": False}}})
    async with engine_on(sqlite_url, config=config) as engine:
        root = await user(engine, "root", "admin")
        engine.registry.update([spec()])
        invoke = Calls()
        with pytest.raises(ExecutionDenied, match="tool 'fs/read' is disabled by the operator"):
            await engine.execute(spec(), {}, root, invoke)
        assert invoke.calls == []


async def test_events_for_registration(sqlite_url: str) -> None:
    async with engine_on(sqlite_url) as engine:
        got = anyio.Event()
        events: list[Event] = []

        def on_event(event: Event) -> None:
            events.append(event)
            if len(events) == 2:
                got.set()

        engine.events.subscribe(on_event, types=["tool_registered"])
        engine.registry.update(
            [spec("file/read", risk=None, category=None), spec("shell/exec", risk=None, category=None)]
        )
        with anyio.fail_after(5):
            await got.wait()
        assert [(e.tool, e.data["risk"], e.data["category"]) for e in events] == [
            ("file/read", "safe", "file"),
            ("shell/exec", "dangerous", "shell"),
        ]


async def test_execute_needs_a_started_engine(sqlite_url: str) -> None:
    async with open_store(sqlite_url) as store:
        engine = Engine(store)
        me = await engine.principals.add_user("bob", level="admin")
        with pytest.raises(UsageError, match="not started"):
            await engine.execute(spec(), {}, me, Calls())


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


async def test_interrupted_executions_are_closed_at_start(db_url: str) -> None:
    now = datetime.now(UTC)
    me = Owner.current()
    rows = {
        "exec_1_dead": Owner(dead_pid(), me.host, me.boot),
        "exec_2_alive": Owner(os.getppid(), me.host, me.boot),
        "exec_3_self": me,
        "exec_4_rebooted": Owner(os.getppid(), me.host, "another-boot"),
        "exec_5_elsewhere": Owner(1, "some-other-host", "x"),
        "exec_6_elsewhere_stale": Owner(1, "some-other-host", "x"),
    }
    async with open_store(db_url) as store:
        seed = Engine(store)
        for eid, owner in rows.items():
            started = now - (timedelta(hours=1) if eid.endswith("stale") else timedelta(seconds=5))
            await seed.executions.record(
                Execution(eid, "fs/read", "file", "safe", "running", "bob", started, timeout_ms=30000, owner=owner)
            )
        async with Engine(store) as engine:
            pass
        status = {eid: await engine.executions.get(eid) for eid in rows}
        snap = await engine.metrics()
        fs = snap.tool_metrics("fs/read")
        assert fs is not None and (fs.failures, snap.active, fs.invocations) == (3, 3, 6)
    closed = {eid for eid, e in status.items() if e is not None and e.status == "failed"}
    assert closed == {"exec_1_dead", "exec_4_rebooted", "exec_6_elsewhere_stale"}
    for eid in closed:
        e = status[eid]
        assert e is not None and e.reason == "interrupted" and e.ended_at is not None
    assert "ended before it finished" in (status["exec_1_dead"].error or "")  # type: ignore[union-attr]


async def test_raising_invoke_while_cancelled_is_a_cancellation(sqlite_url: str) -> None:
    class Flaky(Blocker):
        async def __call__(self, arguments: dict[str, Any]) -> ToolResult:
            try:
                return await super().__call__(arguments)
            except anyio.get_cancelled_exc_class():
                raise UpstreamError("stream closed") from None

    async with engine_on(sqlite_url) as engine:
        bob = await user(engine, "bob", "admin")
        blocker, results = Flaky(), []
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_in_background, engine, bob, blocker, results)
            with anyio.fail_after(5):
                await blocker.started.wait()
            [running] = await engine.active(bob)
            await engine.cancel(running.id, bob)
        assert isinstance(results[0], Execution)
        assert (results[0].status, results[0].reason) == ("cancelled", "cancelled by bob")
        assert isinstance(UpstreamError("x"), ToolCallError)


async def test_a_call_makes_only_the_events_a_subscriber_wants(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import toolagent.tools.records as records

    made: list[str] = []

    class CountedEvent(Event):
        def __post_init__(self) -> None:
            made.append(self.type)
            super().__post_init__()

    monkeypatch.setattr(records, "Event", CountedEvent)
    async with engine_on(sqlite_url) as engine:
        me = await user(engine, "erin", "admin")
        seen: list[tuple[str, str | None]] = []
        # Interested in failures only (as the lifecycle log at its default level, warning).
        engine.events.subscribe(
            lambda e: seen.append((e.type, e.status)), interest=lambda kind, status: status == "failed"
        )
        made.clear()
        await engine.execute(spec(), {"path": "/a"}, me, Calls())
        assert made == [] and seen == []  # a success: neither event was even made
        failing = Calls()
        failing.result = ToolResult(True, None, [], "boom")
        await engine.execute(spec(), {"path": "/b"}, me, failing)
        assert made == ["execution_finished"] and seen == [("execution_finished", "failed")]
