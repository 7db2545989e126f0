"""History reads over the partial history indexes: executions in flight (queued, running) sit
between ended ones in time, and every page and statistic matches what the rows themselves say;
each read's plan uses an index on both databases (a condition rendered as a parameter would make
the partial indexes unusable)."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from toolagent.model.execution import Execution
from toolagent.store import Store, open_store
from toolagent.store import engine_tables as et
from toolagent.store.executions import ExecutionStore
from toolagent.store.history import ExecutionFilter, ExecutionHistory

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 6, 1, tzinfo=UTC)
USERS = ("ann", "bob", "cid")
TOOLS = {"fs/read": "file", "web/get": "web", "sh/run": "shell"}
STATUSES = ("success", "success", "failed", "cancelled", "running", "queued")


def rows(n: int = 120, seed: int = 11) -> list[Execution]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        tool = rnd.choice(list(TOOLS))
        status = rnd.choice(STATUSES)
        live = status in et.LIVE_STATUSES
        started = T0 + timedelta(seconds=rnd.randrange(3600))  # ties on started_at too: the id breaks them
        out.append(
            Execution(
                id=f"exec_{i:04d}",
                tool=tool,
                category=TOOLS[tool],
                risk="safe",
                status=status,
                user=rnd.choice(USERS),
                started_at=started,
                ended_at=None if live else started + timedelta(seconds=1),
                duration_ms=None if live else float(rnd.randrange(1, 500)),
                timeout_ms=30000,
                run_id=rnd.choice((None, None, "run_a", "run_b")),
            )
        )
    return out


ROWS = rows()


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[Store]:
    async with open_store(db_url) as s:
        executions = ExecutionStore(s.db)
        for r in ROWS:
            await executions.record(r)
        yield s


def matching(where: ExecutionFilter) -> list[Execution]:
    """The filter applied to the rows in Python, newest first."""

    def keep(e: Execution) -> bool:
        return (
            (where.user is None or e.user == where.user)
            and (where.tool is None or e.tool == where.tool)
            and (where.category is None or e.category == where.category)
            and (where.status is None or e.status == where.status)
            and (where.run_id is None or e.run_id == where.run_id)
            and (where.categories is None or e.category in where.categories)
            and (where.since is None or e.started_at >= where.since)
            and (where.until is None or e.started_at < where.until)
        )

    return sorted(filter(keep, ROWS), key=lambda e: (e.started_at, e.id), reverse=True)


def _name(where: ExecutionFilter) -> str:
    """A test id: the filter's fields that are set (stable across pytest's worker processes)."""
    fields = {k: sorted(v) if isinstance(v, frozenset) else v for k, v in vars(where).items() if v is not None}
    return ",".join(f"{k}={v}" for k, v in fields.items()) or "everything"


FILTERS = [
    ExecutionFilter(),
    ExecutionFilter(user="bob"),
    ExecutionFilter(user="bob", tool="fs/read"),
    ExecutionFilter(user="ann", category="web"),
    ExecutionFilter(user="cid", status="failed"),
    ExecutionFilter(user="bob", status="running"),
    ExecutionFilter(status="queued"),
    ExecutionFilter(status="success"),
    ExecutionFilter(tool="sh/run"),
    ExecutionFilter(category="file"),
    ExecutionFilter(categories=frozenset({"web", "shell"})),
    ExecutionFilter(user="ann", categories=frozenset({"file"})),
    ExecutionFilter(since=T0 + timedelta(minutes=10), until=T0 + timedelta(minutes=40)),
    ExecutionFilter(user="bob", since=T0 + timedelta(minutes=20)),
    ExecutionFilter(run_id="run_a"),
    ExecutionFilter(run_id="run_b", user="cid"),
]


@pytest.mark.parametrize("where", FILTERS, ids=_name)
async def test_pages_and_statistics_match_the_rows(store: Store, where: ExecutionFilter) -> None:
    expected = matching(where)
    assert any(e.status in et.LIVE_STATUSES for e in ROWS) and any(e.status not in et.LIVE_STATUSES for e in ROWS)
    history = ExecutionHistory(store.db)
    for limit, offset in ((100, 0), (7, 0), (7, 5), (5, 13), (3, max(0, len(expected) - 2)), (10, len(expected) + 1)):
        page = await history.page(where, limit=limit, offset=offset)
        assert [e.id for e in page] == [e.id for e in expected[offset : offset + limit]], (limit, offset)
    assert [e.status for e in await history.page(where, limit=100, offset=0)] == [e.status for e in expected[:100]]

    stats = await history.stats_by_scan(where)
    durations = [e.duration_ms for e in expected if e.duration_ms is not None]
    assert (stats.total, stats.success, stats.failed, stats.cancelled, stats.running) == (
        len(expected),
        *(sum(e.status == s for e in expected) for s in ("success", "failed", "cancelled", "running")),
    )
    assert stats.timed == len(durations)
    assert stats.average_ms == pytest.approx(sum(durations) / len(durations) if durations else 0.0)


HISTORY_INDEXES = (
    "ix_executions_user_started",
    "ix_executions_user_tool",
    "ix_executions_user_category",
    "ix_executions_user_status",
    "ix_executions_started",
    "ix_executions_tool",
    "ix_executions_category",
)


def _plan_sqlite(conn: sa.Connection, stmt: Any) -> str:
    compiled = stmt.compile(conn, compile_kwargs={"render_postcompile": True})
    params = compiled.construct_params()
    values = tuple(params[k] for k in compiled.positiontup or ())
    return "\n".join(r[3] for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + str(compiled), values))


@pytest.mark.parametrize("where", FILTERS, ids=_name)
async def test_every_part_of_a_read_uses_an_index(store: Store, where: ExecutionFilter) -> None:
    """Each part of a page read finds its rows through an index, the ended executions' part
    through a partial history index unless it filters on a status; a part whose condition did not
    match its partial index would read the whole table. On SQLite the ended part's keys, what a
    merged page reads of it, come from the index entries alone."""
    t = et.executions
    newest_first = (t.c.started_at.desc(), t.c.id.desc())
    for part in where.parts():
        stmt = sa.select(t).where(*part).order_by(*newest_first).limit(50)
        async with store.db.begin() as conn:
            if store.db.is_sqlite:
                plan = await conn.run_sync(_plan_sqlite, stmt)
                assert "SCAN executions\n" not in plan + "\n", plan
                if et.ENDED in part and where.status is None and where.run_id is None:
                    keys = await conn.run_sync(
                        _plan_sqlite, sa.select(t.c.started_at, t.c.id).where(*part).order_by(*newest_first).limit(50)
                    )
                    assert "USING COVERING INDEX" in keys, keys
            else:
                await conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
                sql = str(stmt.compile(conn.sync_connection, compile_kwargs={"literal_binds": True}))
                plan = "\n".join(r[0] for r in (await conn.exec_driver_sql("EXPLAIN " + sql)).all())
                assert "Seq Scan" not in plan, plan
        assert "INDEX" in plan.upper(), plan
        if et.ENDED in part and where.status is None and where.run_id is None:
            assert any(name in plan for name in HISTORY_INDEXES), plan
        if where.run_id is not None:  # its partial index: comparing `run_id` implies `IS NOT NULL`
            assert "ix_executions_run" in plan, plan
