"""Rate limits and monthly budgets: exact under concurrency, across engines sharing a store (two
connection pools, as two processes would have), window resets by a controlled clock, overrides
per category and per tool, and refused calls using up nothing."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from _support import engine_harness
from _support.engine_harness import passed

from toolagent.engine import Engine, EngineConfig, ExecutionDenied, Principal
from toolagent.engine.limits import BudgetUsedUp, month_window
from toolagent.errors import BudgetExceeded, RateLimited
from toolagent.model.spec import ToolResult, ToolSpec
from toolagent.store import open_store

pytestmark = pytest.mark.anyio

OK = ToolResult(False, None, [], "ok")
#: 2025-03-10 12:00:30 UTC: half a minute into a rate window.
T0 = datetime(2025, 3, 10, 12, 0, 30, tzinfo=UTC).timestamp()


class Clock:
    """A wall clock the test moves."""

    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def spec(name: str = "fs/read", category: str = "file", risk: str = "safe") -> ToolSpec:
    server, _, tool = name.partition("/")
    return ToolSpec(name=name, server=server, tool=tool, risk=risk, category=category)


async def ok(arguments: dict[str, Any]) -> ToolResult:
    return OK


def config(**data: Any) -> EngineConfig:
    base: dict[str, Any] = {"plans": {"free": {"rate_per_minute": 10, "monthly_budget": None}}}
    base.update(data)
    return EngineConfig.from_data(base)


@contextlib.asynccontextmanager
async def engine_on(url: str, clock: Clock, cfg: EngineConfig) -> AsyncIterator[Engine]:
    async with open_store(url) as store, Engine(store, config=cfg, clock=clock, audit=None) as engine:
        yield engine


async def burst(engines: list[Engine], principal: Principal, n: int, tool: ToolSpec | None = None) -> list[Any]:
    """`n` calls at once, spread over `engines`; each result is an Execution or the exception."""
    return await engine_harness.burst(engines, principal, n, tool or spec(), ok)


async def test_rate_limit_is_exact_under_concurrency_and_resets(db_url: str) -> None:
    clock = Clock()
    async with engine_on(db_url, clock, config()) as engine:
        bob = await engine.principals.add_user("bob", level="execute_basic", plan="free")
        results = await burst([engine], bob, 50)
        assert passed(results) == 10
        refusals = [r for r in results if isinstance(r, RateLimited)]
        assert len(refusals) == 40
        r = refusals[0]
        assert (r.code, r.limit, r.remaining, r.retry_after_s) == ("TOO_MANY_REQUESTS", 10, 0, 30.0)
        assert r.message == (
            "user 'bob' exceeded the rate limit of 10 calls per minute; retry in 30 s, or raise it in the engine "
            "config (TOOLAGENT_ENGINE_CONFIG): `plans: {free: {rate_per_minute: N}}` (null: no limit), "
            "or move the user to another plan"
        )
        page = await engine.history(bob, status="failed", limit=100)
        assert page.total_count == 40 and {e.denial for e in page.executions} == {"rate_limited"}
        assert (await engine.metrics(principal=bob)).rate_limited == {"fs/read": 40}

        clock.t += 29.9  # same window
        with pytest.raises(RateLimited):
            await engine.execute(spec(), {}, bob, ok)
        clock.t += 0.1  # the next minute
        assert passed(await burst([engine], bob, 12)) == 10
        [status] = [s for s in await engine.limit_status(bob) if s.kind == "rate"]
        assert (status.used, status.remaining) == (10, 0)


async def test_rate_limit_is_exact_across_engines_sharing_the_store(db_url: str) -> None:
    clock = Clock()
    async with engine_on(db_url, clock, config()) as one, engine_on(db_url, clock, config()) as two:
        bob = await one.principals.add_user("bob", level="execute_basic", plan="free")
        results = await burst([one, two], bob, 40)
        assert passed(results) == 10
        assert sum(isinstance(r, RateLimited) for r in results) == 30


@pytest.mark.postgres
async def test_rate_limit_is_exact_across_engines_on_postgres(pg_url: str) -> None:
    clock = Clock()
    engines = [engine_on(pg_url, clock, config()) for _ in range(3)]
    async with engines[0] as a, engines[1] as b, engines[2] as c:
        bob = await a.principals.add_user("bob", level="execute_basic", plan="free")
        results = await burst([a, b, c], bob, 60)
        assert passed(results) == 10
        assert sum(isinstance(r, RateLimited) for r in results) == 50


async def test_category_and_tool_overrides(db_url: str) -> None:
    clock = Clock()
    cfg = config(category_rate_per_minute={"shell": 3}, tool_rate_per_minute={"web/post": 2})
    async with engine_on(db_url, clock, cfg) as engine:
        root = await engine.principals.add_user("root", level="admin", plan="free")
        shell = spec("sh/run", "shell", "dangerous")
        post = spec("web/post", "web", "moderate")
        assert passed(await burst([engine], root, 5, shell)) == 3
        with pytest.raises(RateLimited, match="3 calls per minute to tools of category shell"):
            await engine.execute(shell, {}, root, ok)
        assert passed(await burst([engine], root, 4, post)) == 2
        with pytest.raises(RateLimited, match="2 calls per minute to 'web/post'"):
            await engine.execute(post, {}, root, ok)
        # 5 of the plan's 10 used; refused calls took nothing from it.
        assert passed(await burst([engine], root, 8)) == 5


async def test_monthly_budget_is_exact_and_resets_next_month(db_url: str) -> None:
    clock = Clock()
    cfg = EngineConfig.from_data({"plans": {"free": {"rate_per_minute": None, "monthly_budget": 5}}})
    async with engine_on(db_url, clock, cfg) as engine:
        bob = await engine.principals.add_user("bob", level="execute_basic", plan="free")
        results = await burst([engine], bob, 20)
        assert passed(results) == 5
        refusals = [r for r in results if isinstance(r, BudgetExceeded)]
        assert len(refusals) == 15 and all(isinstance(r, BudgetUsedUp) for r in refusals)
        assert refusals[0].code == "TOO_MANY_REQUESTS"
        assert (
            "monthly budget of plan free (5 tool calls per month); it resets on 2025-04-01 UTC" in refusals[0].message
        )
        assert (await engine.history(bob, status="failed", limit=100)).executions[0].denial == "budget"
        clock.t = datetime(2025, 4, 1, tzinfo=UTC).timestamp()
        assert passed(await burst([engine], bob, 7)) == 5
        bob = await engine.principals.set_plan("bob", "enterprise")  # unlimited
        assert passed(await burst([engine], bob, 7)) == 7


async def test_gate_denials_use_up_nothing(db_url: str) -> None:
    clock = Clock()
    async with engine_on(db_url, clock, config()) as engine:
        bob = await engine.principals.add_user("bob", level="execute_basic", plan="free")
        for _ in range(15):
            with pytest.raises(ExecutionDenied):
                await engine.execute(spec("sh/run", "shell", "dangerous"), {}, bob, ok)
        assert passed(await burst([engine], bob, 12)) == 10


async def test_the_local_operator_has_no_per_minute_cap_but_keeps_its_budget(tmp_path: Any) -> None:
    clock = Clock()
    cfg = config(plans={"free": {"rate_per_minute": 10, "monthly_budget": 40}}, local_user_plan="free")
    async with engine_on(f"sqlite+aiosqlite:///{tmp_path / 's.db'}", clock, cfg) as engine:
        me = await engine.principals.resolve_cli_user(None)
        assert me.local_operator and me.plan == "free"
        assert passed(await burst([engine], me, 25)) == 25  # past the plan's 10 a minute
        # The same user as the API sees it (no local flag) is held to its plan's rate.
        same_user = await engine.principals.get_user(me.name)
        assert not same_user.local_operator
        results = await burst([engine], same_user, 12)
        assert passed(results) == 10
        assert sum(isinstance(r, RateLimited) for r in results) == 2
        # The budget counts every call: 35 of 40 are used.
        results = await burst([engine], me, 10)
        assert passed(results) == 5
        assert {type(r) for r in results if isinstance(r, Exception)} == {BudgetUsedUp}


async def test_a_local_operator_rate_when_set_is_its_cap_and_the_refusal_names_it(tmp_path: Any) -> None:
    clock = Clock()
    async with engine_on(
        f"sqlite+aiosqlite:///{tmp_path / 's.db'}", clock, config(local_user_rate_per_minute=3)
    ) as engine:
        me = await engine.principals.resolve_cli_user(None)
        results = await burst([engine], me, 5)
        assert passed(results) == 3
        refusal = next(r for r in results if isinstance(r, RateLimited))
        assert refusal.limit == 3
        assert "`local_user_rate_per_minute: null` (the CLI's local user)" in refusal.message


def test_month_window() -> None:
    n, end = month_window(datetime(2025, 12, 31, 23, 59, tzinfo=UTC).timestamp())
    assert n == 2025 * 12 + 11 and end == datetime(2026, 1, 1, tzinfo=UTC).timestamp()
