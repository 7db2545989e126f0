"""Where a BUILD run or an async tool call goes: decided once, from `--submit`, the setting and the store."""

from __future__ import annotations

import pytest

from toolagent.errors import UsageError
from toolagent.workers.dispatch import QUEUE_NEEDS_POSTGRES, SUBMIT_NEEDS_POSTGRES, Dispatcher

# (--submit, TOOLAGENT_EXECUTION, SQLite store) -> (queued, note)
TABLE = [
    (False, None, True, False, None),
    (False, None, False, False, None),
    (False, "inprocess", True, False, None),
    (False, "inprocess", False, False, None),
    (False, "queue", False, True, None),
    (False, "queue", True, False, QUEUE_NEEDS_POSTGRES),
    (True, None, False, True, None),
    (True, "inprocess", False, True, None),
    (True, "queue", False, True, None),
]


@pytest.mark.parametrize(("submit", "execution", "sqlite", "queued", "note"), TABLE)
def test_the_decision_table(submit: bool, execution: str | None, sqlite: bool, queued: bool, note: str | None) -> None:
    dispatch = Dispatcher.decide(submit=submit, execution=execution, sqlite=sqlite)
    assert (dispatch.queued, dispatch.note) == (queued, note)


@pytest.mark.parametrize("execution", [None, "inprocess", "queue"])
def test_submit_on_sqlite_is_refused_naming_the_setting(execution: str | None) -> None:
    with pytest.raises(UsageError) as caught:
        Dispatcher.decide(submit=True, execution=execution, sqlite=True)
    assert caught.value.message == SUBMIT_NEEDS_POSTGRES
    assert "TOOLAGENT_DATABASE_URL" in SUBMIT_NEEDS_POSTGRES


def test_here_is_the_in_process_answer() -> None:
    assert Dispatcher.decide(sqlite=False) is Dispatcher.HERE
    assert not Dispatcher.HERE.queued and Dispatcher.HERE.note is None


@pytest.mark.anyio
async def test_a_dispatcher_that_runs_here_submits_nothing() -> None:
    with pytest.raises(UsageError, match="in its own process"):
        await Dispatcher.HERE.submit_build(None, None, None, None)  # type: ignore[arg-type]  # refused before any is read
    with pytest.raises(UsageError, match="in its own process"):
        await Dispatcher.HERE.submit_call(None, None, {}, None)  # type: ignore[arg-type]
