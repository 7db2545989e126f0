"""Helpers for tests of the engine's limits: a burst of concurrent executions and what passed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from toolagent.engine import Engine, ExecutionDenied, Principal
from toolagent.errors import BudgetExceeded, RateLimited
from toolagent.model.execution import Execution
from toolagent.model.spec import ToolResult, ToolSpec


async def burst(
    engines: list[Engine],
    principal: Principal,
    n: int,
    tool: ToolSpec,
    invoke: Callable[[dict[str, Any]], Awaitable[ToolResult]],
    *,
    limit_s: float = 60,
) -> list[Any]:
    """`n` calls of `tool` at once, spread over `engines`; each result is an Execution or the
    refusal raised (rate limit, budget, denial)."""
    results: list[Any] = []

    async def one(i: int) -> None:
        try:
            results.append(await engines[i % len(engines)].execute(tool, {"i": i}, principal, invoke))
        except (RateLimited, BudgetExceeded, ExecutionDenied) as exc:
            results.append(exc)

    with anyio.fail_after(limit_s):
        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(one, i)
    return results


def passed(results: list[Any]) -> int:
    """How many of a burst's calls ran and succeeded."""
    return sum(isinstance(r, Execution) and r.status == "success" for r in results)
