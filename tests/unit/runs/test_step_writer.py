"""The step records' write-behind: at most one interval late, batched, nothing lost at close."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from toolagent.runs.writer import StepWriter

pytestmark = pytest.mark.anyio


class _Runs:
    def __init__(self) -> None:
        self.writes: list[tuple[float, list[dict[str, Any]]]] = []

    async def update_steps(self, run_id: str, rows: list[dict[str, Any]]) -> None:
        assert run_id == "run_1"
        self.writes.append((time.monotonic(), rows))


def _writer(interval_s: float) -> tuple[StepWriter, _Runs]:
    runs = _Runs()
    return StepWriter(SimpleNamespace(runs=runs), "run_1", flush_interval_s=interval_s), runs  # type: ignore[arg-type]


async def _first_write(runs: _Runs) -> tuple[float, list[dict[str, Any]]]:
    with anyio.fail_after(10):
        while not runs.writes:
            await anyio.sleep(0.01)
    return runs.writes[0]


async def test_snapshots_of_one_interval_are_written_together_without_waiting_for_close() -> None:
    writer, runs = _writer(0.1)
    async with anyio.create_task_group() as tg:
        await tg.start(writer.run)
        for status in ("running", "success"):
            writer.put(0, {"status": status})
        writer.put(1, {"status": "running"})
        await anyio.sleep(0)
        assert runs.writes == []  # handing over a snapshot never writes on the step's account
        first_at, first = await _first_write(runs)
        closing_at = time.monotonic()
        with anyio.CancelScope(shield=True):
            await writer.close()
    assert first_at <= closing_at
    assert first == [{"position": 0, "status": "success"}, {"position": 1, "status": "running"}]
    assert len(runs.writes) == 1  # nothing was pending afterwards, so nothing more was written


async def test_close_writes_what_is_pending_at_once() -> None:
    writer, runs = _writer(60)
    async with anyio.create_task_group() as tg:
        await tg.start(writer.run)
        writer.put(0, {"status": "failed", "error": "boom"})
        with anyio.fail_after(5), anyio.CancelScope(shield=True):  # not the 60 s interval
            await writer.close()
    assert [rows for _, rows in runs.writes] == [[{"position": 0, "status": "failed", "error": "boom"}]]


async def test_a_snapshot_after_a_write_waits_for_the_next_one_or_for_close() -> None:
    writer, runs = _writer(0.05)
    async with anyio.create_task_group() as tg:
        await tg.start(writer.run)
        writer.put(0, {"status": "running"})
        await _first_write(runs)
        writer.put(0, {"status": "success"})
        with anyio.CancelScope(shield=True):
            await writer.close()
    assert [rows for _, rows in runs.writes] == [
        [{"position": 0, "status": "running"}],
        [{"position": 0, "status": "success"}],
    ]


async def test_a_step_is_snapshotted_when_written_once_however_often_it_was_handed_over() -> None:
    runs = _Runs()
    taken: list[str] = []

    def snapshot(step: dict[str, Any]) -> dict[str, Any]:
        taken.append(step["status"])
        return dict(step)

    writer = StepWriter(SimpleNamespace(runs=runs), "run_1", snapshot=snapshot, flush_interval_s=60)  # type: ignore[arg-type]
    step = {"status": "running"}
    async with anyio.create_task_group() as tg:
        await tg.start(writer.run)
        writer.put(0, step)
        step["status"] = "success"  # changed after it was handed over, as a step's state is
        writer.put(0, step)
        assert taken == []  # nothing was spent on the step's own time
        with anyio.CancelScope(shield=True):
            await writer.close()
    assert taken == ["success"]
    assert [rows for _, rows in runs.writes] == [[{"position": 0, "status": "success"}]]
