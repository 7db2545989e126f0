"""History (filters, paging, validation, isolation), statistics, metrics on known data, the Prometheus
rendering of the snapshot, tool discovery and details, and pruning."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from toolagent.engine import Engine, HistoryQuery, Principal
from toolagent.engine.prometheus import render
from toolagent.errors import NotFound, PermissionDenied, UsageError
from toolagent.model.execution import Execution
from toolagent.model.spec import ToolResult, ToolSpec
from toolagent.store import open_store

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 3, 10, 12, 0, tzinfo=UTC)
NOW = T0 + timedelta(days=1)


def row(n: int, tool: str, status: str, user: str = "bob", duration_ms: float | None = 10.0, **kw: Any) -> Execution:
    category = {"fs": "file", "web": "web", "sh": "shell"}[tool.split("/")[0]]
    return Execution(
        id=f"exec_{n:04d}",
        tool=tool,
        category=category,
        risk="safe",
        status=status,
        user=user,
        started_at=T0 + timedelta(minutes=n),
        ended_at=None if status == "running" else T0 + timedelta(minutes=n, seconds=1),
        duration_ms=None if status == "running" else duration_ms,
        timeout_ms=30000,
        **kw,
    )


#: bob: fs/read x6 (durations 10..60, one failed), web/get x3 (one cancelled), one denied sh/run, one running fs/read;
#: carol: fs/read x2.
ROWS = [
    *(row(i, "fs/read", "failed" if i == 3 else "success", duration_ms=10.0 * i) for i in range(1, 7)),
    row(7, "web/get", "success", duration_ms=100.0),
    row(8, "web/get", "success", duration_ms=200.0),
    row(9, "web/get", "cancelled", duration_ms=1000.0, reason="timeout after 1000 ms"),
    row(10, "sh/run", "failed", duration_ms=None, denied=True, denial="level", reason="nope"),
    row(11, "fs/read", "running"),
    row(12, "fs/read", "success", user="carol", duration_ms=5.0),
    row(13, "fs/read", "success", user="carol", duration_ms=7.0),
]


@pytest.fixture
async def engine(db_url: str) -> AsyncIterator[Engine]:
    async with open_store(db_url) as store:
        e = Engine(store, clock=NOW.timestamp, audit=None)
        for r in ROWS:
            await e.executions.record(r)
        yield e


BOB = Principal("bob", "execute_basic", "free")
CAROL = Principal("carol", "execute_basic", "free")
ROOT = Principal("root", "admin", "enterprise")


async def ids(engine: Engine, who: Principal, **kw: Any) -> list[int]:
    page = await engine.history(who, **kw)
    return [int(e.id.split("_")[1]) for e in page.executions]


async def test_history_filters_and_paging(engine: Engine) -> None:
    assert await ids(engine, BOB) == [11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1]
    assert await ids(engine, CAROL) == [13, 12]
    assert await ids(engine, BOB, tool="web/get") == [9, 8, 7]
    assert await ids(engine, BOB, category="file") == [11, 6, 5, 4, 3, 2, 1]
    assert await ids(engine, BOB, status="failed") == [10, 3]
    assert await ids(engine, BOB, status="running") == [11]
    assert await ids(engine, BOB, since=T0 + timedelta(minutes=4), until=T0 + timedelta(minutes=8)) == [7, 6, 5, 4]
    assert await ids(engine, BOB, limit=3, offset=2) == [9, 8, 7]
    assert await ids(engine, BOB, limit=3, offset=10) == [1]
    assert await ids(engine, ROOT, all_users=True, tool="fs/read", limit=3) == [13, 12, 11]
    assert await ids(engine, ROOT, user="carol") == [13, 12]
    assert await ids(engine, ROOT) == []  # an admin's own history is theirs alone unless asked
    page = await engine.history(BOB, HistoryQuery(tool="fs/read", limit=2))
    data = page.to_json()
    assert (data["totalCount"], data["limit"], data["offset"]) == (7, 2, 0)
    assert data["executions"][0]["toolName"] == "fs/read" and data["executions"][0]["status"] == "running"
    assert set(data["executions"][1]) >= {
        "id",
        "toolName",
        "category",
        "status",
        "startTime",
        "endTime",
        "executionTime",
        "result",
        "error",
        "userId",
        "sessionId",
        "metadata",
    }


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"limit": 0}, "limit must be between 1 and 100 \\(got 0\\)"),
        ({"limit": 101}, "limit must be between 1 and 100 \\(got 101\\)"),
        ({"offset": -1}, "offset must be between 0 and 1000000000 \\(got -1\\)"),
        ({"offset": 10**10}, "offset must be between 0 and 1000000000"),
        ({"status": "done"}, "unknown status 'done'"),
        ({"category": "files"}, "unknown category 'files'"),
        ({"since": datetime(2025, 1, 1)}, "since needs a time zone"),
        ({"since": T0, "until": T0}, "until must be after since"),
    ],
)
def test_history_query_validation(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        HistoryQuery(**kw)


async def test_isolation(engine: Engine) -> None:
    with pytest.raises(PermissionDenied, match="may only see their own executions"):
        await engine.history(BOB, all_users=True)
    with pytest.raises(PermissionDenied):
        await engine.history(BOB, user="carol")
    assert await ids(engine, BOB, user="bob", limit=1) == [11]


async def test_stats(engine: Engine) -> None:
    s = await engine.stats(BOB)
    assert (s.total, s.success, s.failed, s.cancelled, s.running, s.denied) == (11, 7, 2, 1, 1, 1)
    # Durations of the rows that ran and ended: 10..60, 100, 200, 1000.
    assert s.average_ms == pytest.approx((210 + 100 + 200 + 1000) / 9)
    assert s.to_json()["averageExecutionTime"] == s.average_ms
    s = await engine.stats(ROOT, all_users=True, tool="fs/read")
    assert (s.total, s.success, s.failed) == (9, 7, 1)


async def test_metrics_on_known_data(engine: Engine) -> None:
    engine.registry.update(
        [
            ToolSpec("fs/read", "fs", "read", category="file", risk="safe"),
            ToolSpec("fs/write", "fs", "write", category="file"),
        ]
    )
    snap = await engine.metrics(principal=BOB)
    fs = snap.tool_metrics("fs/read")
    assert fs is not None
    assert (fs.invocations, fs.successes, fs.failures, fs.cancelled) == (9, 7, 1, 0)
    durations = sorted([10.0, 20, 30, 40, 50, 60, 5, 7])
    assert fs.average_ms == pytest.approx(sum(durations) / 8)
    assert (fs.p50_ms, fs.p95_ms) == (durations[3], durations[7])  # nearest rank: 4th and 8th of 8
    assert fs.last_invoked == T0 + timedelta(minutes=13)
    web = snap.tool_metrics("web/get")
    assert web is not None
    assert (web.invocations, web.successes, web.cancelled, web.p50_ms, web.p95_ms) == (3, 2, 1, 200.0, 1000.0)
    unused = snap.tool_metrics("fs/write")
    assert unused is not None and unused.invocations == 0 and snap.total_tools == 2
    sh = snap.tool_metrics("sh/run")
    assert sh is not None and sh.invocations == 0  # the denial never ran
    assert snap.most_used == (("fs/read", 9), ("web/get", 3))
    assert [(c.category, c.invocations, c.success) for c in snap.categories] == [("file", 9, 7), ("web", 3, 2)]
    assert [(d.tool, d.reason, d.count) for d in snap.denials] == [("sh/run", "level", 1)]
    assert snap.active == 1
    assert [u.user for u in snap.users] == ["bob"]  # a non-admin sees only their own line
    assert snap.user_stats is not None
    assert (snap.user_stats.total, snap.user_stats.success, snap.user_stats.failed, snap.user_stats.denied) == (
        11,
        7,
        1,
        1,
    )
    data = snap.to_json()
    assert data["registryMetrics"] == {"totalTools": 2}
    assert data["mostUsedTools"] == [{"tool": "fs/read", "count": 9}, {"tool": "web/get", "count": 3}]
    assert data["categoryStats"] == {"file": 9, "web": 3} and data["activeExecutions"] == 1
    assert data["userStats"]["totalExecutions"] == 11

    admin = await engine.metrics(principal=ROOT)
    assert [u.user for u in admin.users] == ["bob", "carol"] and admin.user_stats is not None
    assert admin.user_stats.total == 0

    one = await engine.metrics("web/get")
    assert [t.tool for t in one.tools] == ["web/get"] and one.to_json()["registryMetrics"]["totalInvocations"] == 3

    text = render(admin.to_prometheus())
    assert 'tool_execution_total{category="file",status="success",tool="fs/read"} 7.0' in text
    assert 'tool_execution_total{category="web",status="cancelled",tool="web/get"} 1.0' in text
    assert 'tool_permission_denied_total{reason="level",tool="sh/run"} 1.0' in text
    assert 'tool_execution_duration_seconds_bucket{le="0.25",tool="web/get"} 2.0' in text
    assert 'tool_execution_duration_seconds_count{tool="fs/read"} 8.0' in text
    assert "tool_executions_active 1.0" in text
    assert 'tool_user_executions_total{status="denied",user="bob"} 1.0' in text


async def test_tool_discovery_and_details(engine: Engine) -> None:
    engine.registry.update(
        [
            ToolSpec("fs/read", "fs", "read", description="Read a file", category="file", risk="safe"),
            ToolSpec("sh/run", "sh", "run", description="Run a command", category="shell"),
        ]
    )
    listing = await engine.list_tools(BOB)
    assert [(t["name"], t["runnable"]) for t in listing.to_json()["tools"]] == [("fs/read", True), ("sh/run", False)]
    assert [e.name for e in (await engine.list_tools(BOB, search="COMMAND")).tools] == ["sh/run"]
    with pytest.raises(UsageError, match="unknown category"):
        await engine.list_tools(BOB, category="nope")
    details = await engine.tool_details("fs/read", BOB)
    data = details.to_json()
    assert data["tool"]["inputSchema"] == {"type": "object"} and data["tool"]["category"] == "file"
    assert data["metrics"]["totalInvocations"] == 9
    assert data["userStats"]["totalExecutions"] == 7 and data["userStats"]["successfulExecutions"] == 5
    assert data["userStats"]["lastExecuted"] == (T0 + timedelta(minutes=11)).isoformat()
    with pytest.raises(NotFound, match="tool 'fs/nope' not found"):
        await engine.tool_details("fs/nope", BOB)


async def test_prune_keeps_running_and_recent(engine: Engine) -> None:
    assert await engine.prune(older_than_days=2) == 0
    # NOW is one day after T0: everything that ended is older than 0 days.
    assert await engine.prune(older_than_days=0) == 12
    assert await ids(engine, BOB) == [11]


async def test_results_round_trip(db_url: str) -> None:
    async with open_store(db_url) as store:
        e = Engine(store, audit=None)
        result = ToolResult(True, {"a": [1, 2]}, [{"type": "text", "text": "x"}], "x")
        await e.executions.record(
            row(
                1,
                "fs/read",
                "failed",
                result=result,
                error="x",
                metadata={"k": "v"},
                arguments={"path": "/p"},
                session_id="s",
                api_key_id="key_1",
                run_id="run_1",
            )
        )
        got = await e.get_execution("exec_0001", BOB)
    assert got.result == result and got.metadata == {"k": "v"} and got.arguments == {"path": "/p"}
    assert (got.session_id, got.api_key_id, got.run_id, got.started_at) == (
        "s",
        "key_1",
        "run_1",
        T0 + timedelta(minutes=1),
    )


def figures(snap: Any) -> Any:
    return (snap.tools, snap.users, snap.categories, snap.most_used, snap.denials, snap.active)


async def test_totals_follow_prune_and_match_a_recount(engine: Engine) -> None:
    before = await engine.metrics(principal=ROOT)
    await engine.executions.rebuild_totals()
    assert figures(await engine.metrics(principal=ROOT)) == figures(before)
    # Rows 1-4 ended before minute 5: their counts, durations and buckets leave the totals with them.
    assert await engine.executions.prune(T0 + timedelta(minutes=5)) == 4
    after = await engine.metrics(principal=ROOT)
    fs = after.tool_metrics("fs/read")
    assert fs is not None and (fs.invocations, fs.successes, fs.failures) == (5, 4, 0)
    assert (fs.p50_ms, fs.p95_ms) == (7.0, 60.0)  # of 5, 7, 50, 60
    await engine.executions.rebuild_totals()
    assert figures(await engine.metrics(principal=ROOT)) == figures(after)


@pytest.mark.parametrize(
    ("who", "kw"),
    [
        (BOB, {}),
        (BOB, {"tool": "fs/read"}),
        (BOB, {"category": "shell"}),
        (BOB, {"status": "running"}),
        (BOB, {"status": "failed"}),
        (ROOT, {"all_users": True}),
        (ROOT, {"user": "carol"}),
        (ROOT, {"all_users": True, "tool": "fs/read", "status": "success"}),
        (CAROL, {"tool": "web/get"}),
    ],
)
async def test_stats_from_totals_match_a_scan(engine: Engine, who: Principal, kw: dict[str, Any]) -> None:
    query = HistoryQuery(**kw)
    fast, scan = await engine.history_store.stats(who, query), await engine.history_store.stats_by_scan(who, query)
    assert fast.average_ms == pytest.approx(scan.average_ms)
    assert (fast.total, fast.success, fast.failed, fast.cancelled, fast.running, fast.denied) == (
        scan.total,
        scan.success,
        scan.failed,
        scan.cancelled,
        scan.running,
        scan.denied,
    )
