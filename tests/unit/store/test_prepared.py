"""`Prepared`: a statement run through the driver stores exactly what SQLAlchemy's own path stores."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from toolagent.model.status import ExecutionStatus
from toolagent.store import engine_tables as et
from toolagent.store import open_store
from toolagent.store.prepared import Prepared

pytestmark = pytest.mark.anyio

T = et.executions
WHEN = datetime(2026, 11, 24, 3, 4, 5, 678901, tzinfo=UTC)


def _row(execution_id: str, **extra: object) -> dict[str, object]:
    return {
        "id": execution_id,
        "tool": "bench/echo",
        "category": "general",
        "risk": "safe",
        "status": ExecutionStatus.RUNNING,
        "denied": False,
        "denial": None,
        "user_name": "ana",
        "level": "admin",
        "api_key_id": None,
        "session_id": None,
        "run_id": None,
        "metadata": {"k": [1, "two", None]},
        "arguments": {"text": "héllo", "n": 2.5},
        "timeout_ms": 30_000,
        "started_at": WHEN,
        "ended_at": None,
        "duration_ms": None,
        "result": None,
        "error": None,
        "reason": None,
        "owner_pid": 1,
        "owner_host": "h",
        "owner_boot": "b",
        **extra,
    }


async def test_rows_written_through_the_driver_read_back_like_rows_written_by_sqlalchemy(db_url: str) -> None:
    insert = Prepared(T.insert())
    finish = Prepared(T.update().where((T.c.id == sa.bindparam("k_id")) & (T.c.status == ExecutionStatus.RUNNING)))
    done = {
        "status": ExecutionStatus.SUCCESS,
        "ended_at": WHEN,
        "duration_ms": 1.5,
        "result": {"isError": False, "content": [{"type": "text", "text": "ok"}]},
        "error": None,
    }
    async with open_store(db_url) as store:

        def write(conn: sa.Connection) -> list[int]:
            conn.execute(T.insert(), _row("by-sqlalchemy"))
            insert.execute(conn, _row("by-driver"))
            insert.execute(conn, [_row("many-1"), _row("many-2")])
            counts = [
                conn.execute(
                    T.update()
                    .where((T.c.id == "by-sqlalchemy") & (T.c.status == ExecutionStatus.RUNNING))
                    .values(**done)
                ).rowcount
            ]
            counts += [
                finish.execute(conn, {"k_id": key, **done}).rowcount for key in ("by-driver", "by-driver", "many-1")
            ]
            return counts

        counts = await store.db.write(write)
        async with store.db.begin() as conn:
            rows = {r.id: r._asdict() for r in await conn.execute(sa.select(T))}
    # The fixed `status = 'running'` condition is applied: a second finish finds nothing.
    assert counts == [1, 1, 0, 1]
    reference = rows.pop("by-sqlalchemy")
    for key in ("by-driver", "many-1"):
        assert {k: v for k, v in rows[key].items() if k != "id"} == {k: v for k, v in reference.items() if k != "id"}
    assert rows["many-2"]["status"] == ExecutionStatus.RUNNING and rows["many-2"]["metadata"] == {"k": [1, "two", None]}
    assert rows["by-driver"]["result"] == done["result"] and rows["by-driver"]["arguments"] == {
        "text": "héllo",
        "n": 2.5,
    }


async def test_execute_each_runs_once_per_row_and_gives_each_its_rowcount(db_url: str) -> None:
    finish = Prepared(T.update().where((T.c.id == sa.bindparam("k_id")) & (T.c.status == ExecutionStatus.RUNNING)))
    in_list = Prepared(T.update().where(T.c.id.in_(sa.bindparam("ids", expanding=True))).values(reason="listed"))
    done = {"status": ExecutionStatus.SUCCESS, "ended_at": WHEN, "duration_ms": 2.0, "result": None, "error": None}
    async with open_store(db_url) as store:

        def write(conn: sa.Connection) -> tuple[list[int], list[int], list[int]]:
            conn.execute(T.insert(), [_row("a"), _row("b"), _row("c", status=ExecutionStatus.FAILED)])
            counts = finish.execute_each(conn, [{"k_id": k, **done} for k in ("a", "c", "zz", "b", "a")])
            # A statement it cannot prepare runs row by row through SQLAlchemy, with the same answer.
            return (
                counts,
                in_list.execute_each(conn, [{"ids": ["a", "b"]}, {"ids": ["zz"]}]),
                finish.execute_each(conn, []),
            )

        counts, listed, none = await store.db.write(write)
        async with store.db.begin() as conn:
            rows = {r.id: (r.status, r.duration_ms, r.reason) for r in await conn.execute(sa.select(T))}
    assert counts == [1, 0, 0, 1, 0]  # "c" was not running, "zz" does not exist, "a" was finished already
    assert (listed, none) == ([2, 0], [])
    assert rows == {"a": ("success", 2.0, "listed"), "b": ("success", 2.0, "listed"), "c": ("failed", None, None)}


async def test_returning_and_statements_it_cannot_prepare_still_run(db_url: str) -> None:
    in_list = Prepared(sa.select(T.c.id).where(T.c.id.in_(sa.bindparam("ids", expanding=True))).order_by(T.c.id))
    returning = Prepared(
        T.update()
        .where(T.c.id == sa.bindparam("k_id"))
        .values(reason=sa.bindparam("b_reason"))
        .returning(T.c.id, T.c.reason)
    )
    async with open_store(db_url) as store:

        def write(conn: sa.Connection) -> tuple[list[str], tuple[str, str] | None]:
            conn.execute(T.insert(), [_row("a"), _row("b"), _row("c")])
            ids = [r.id for r in in_list.execute(conn, {"ids": ["a", "c", "zz"]})]
            row = returning.execute(conn, {"k_id": "b", "b_reason": "because"}).first()
            return ids, None if row is None else (row[0], row[1])

        ids, returned = await store.db.write(write)
    assert ids == ["a", "c"]  # an expanding IN list takes SQLAlchemy's own path
    assert returned == ("b", "because")


async def test_a_driver_error_is_raised_as_sqlalchemys_and_translated_by_the_store(db_url: str) -> None:
    from toolagent.errors import StoreError

    insert = Prepared(T.insert())
    async with open_store(db_url) as store:
        await store.db.write(lambda conn: insert.execute(conn, _row("twice")))
        with pytest.raises(StoreError, match="store error") as caught:
            await store.db.write(lambda conn: insert.execute(conn, _row("twice")))
        async with store.db.begin() as conn:
            count = await conn.scalar(sa.select(sa.func.count()).select_from(T))
    assert isinstance(caught.value.__cause__, sa.exc.IntegrityError)  # what `conn.execute` raises
    assert count == 1


async def test_rows_read_through_the_driver_come_back_as_sqlalchemy_returns_them(db_url: str) -> None:
    by_id = sa.select(T).where(T.c.id == sa.bindparam("b_id"))
    prepared = Prepared(by_id)
    async with open_store(db_url) as store:
        await store.db.write(lambda conn: conn.execute(T.insert(), _row("x", ended_at=WHEN, duration_ms=2.5)))

        def read(conn: sa.Connection) -> tuple[dict[str, object], dict[str, object]]:
            ours = prepared.execute(conn, {"b_id": "x"}).first()
            theirs = conn.execute(by_id, {"b_id": "x"}).first()
            return ours._asdict(), theirs._asdict()

        ours, theirs = await store.db.write(read)
    assert ours == theirs
    assert ours["metadata"] == {"k": [1, "two", None]} and ours["started_at"].replace(tzinfo=UTC) == WHEN


async def test_none_and_fixed_values_are_stored_as_sqlalchemy_stores_them(db_url: str) -> None:
    # A JSON column given None holds the JSON text `null` (the column type's own conversion), not
    # SQL NULL; a datetime given None holds NULL; a fixed value in the statement is converted as
    # SQLAlchemy converts it. `Prepared` learns these once, so compare what each path stored.
    insert = Prepared(T.insert())
    fixed = Prepared(T.update().where(T.c.id == sa.bindparam("k_id")).values(ended_at=WHEN, metadata=None))
    nothing = {"metadata": None, "arguments": None, "result": None, "ended_at": None, "duration_ms": None}
    stored = sa.select(
        T.c.id,
        T.c.metadata.is_(None),
        T.c.arguments.is_(None),
        T.c.result.is_(None),
        T.c.ended_at.is_(None),
        sa.cast(T.c.ended_at, sa.String),
    )
    async with open_store(db_url) as store:

        def write(conn: sa.Connection) -> None:
            conn.execute(T.insert(), _row("by-sqlalchemy", **nothing))
            insert.execute(conn, _row("by-driver", **nothing))
            insert.execute(conn, [_row("many-1", **nothing), _row("many-2", **nothing)])
            conn.execute(T.insert(), [_row("fixed-by-sqlalchemy"), _row("fixed-by-driver")])
            conn.execute(T.update().where(T.c.id == "fixed-by-sqlalchemy").values(ended_at=WHEN, metadata=None))
            fixed.execute(conn, {"k_id": "fixed-by-driver"})

        await store.db.write(write)
        async with store.db.begin() as conn:
            rows = {r[0]: tuple(r[1:]) for r in await conn.execute(stored)}
    for key in ("by-driver", "many-1", "many-2"):
        assert rows[key] == rows["by-sqlalchemy"]
    assert rows["fixed-by-driver"] == rows["fixed-by-sqlalchemy"]
    assert rows["by-sqlalchemy"][3] is True and rows["fixed-by-driver"][3] is False  # NULL time, then a time
