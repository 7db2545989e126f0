"""The lifecycle event bus: order, filters, sync and async subscribers, failures and unsubscribing."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC

import anyio
import pytest

from toolagent.engine.events import EVENT_TYPES, Event, EventBus

pytestmark = pytest.mark.anyio


def test_event_defaults_and_json() -> None:
    data = {"risk": "safe"}
    e = Event(
        "execution_finished",
        execution_id="e1",
        tool="file_read",
        user="alice",
        status="success",
        duration_ms=12.5,
        data=data,
    )
    data["risk"] = "changed"
    assert e.timestamp.tzinfo == UTC
    assert e.data == {"risk": "safe"}
    assert e.to_json() == {
        "type": "execution_finished",
        "timestamp": e.timestamp.isoformat(),
        "execution_id": "e1",
        "tool": "file_read",
        "user": "alice",
        "status": "success",
        "duration_ms": 12.5,
        "data": {"risk": "safe"},
    }
    assert replace(e, status="failed").status == "failed"


def test_every_lifecycle_type_is_known() -> None:
    assert EVENT_TYPES == {
        "tool_registered",
        "execution_started",
        "execution_finished",
        "execution_cancelled",
        "execution_denied",
        "run_started",
        "step_started",
        "step_finished",
        "run_finished",
    }
    with pytest.raises(ValueError, match="unknown event type 'execution_exploded'"):
        Event("execution_exploded")  # type: ignore[arg-type]


async def test_sync_and_async_subscribers_get_events_in_order() -> None:
    bus = EventBus()
    seen: list[tuple[str, str]] = []

    def sync_sub(e: Event) -> None:
        seen.append(("sync", e.type))

    async def async_sub(e: Event) -> None:
        await anyio.lowlevel.checkpoint()
        seen.append(("async", e.type))

    bus.subscribe(sync_sub)
    bus.subscribe(async_sub)
    await bus.emit(Event("execution_started"))
    await bus.emit(Event("execution_finished", status="success"))
    assert seen == [
        ("sync", "execution_started"),
        ("async", "execution_started"),
        ("sync", "execution_finished"),
        ("async", "execution_finished"),
    ]


async def test_type_filter_and_unsubscribe() -> None:
    bus = EventBus()
    seen: list[str] = []
    unsubscribe = bus.subscribe(lambda e: seen.append(e.type), types={"run_started", "run_finished"})
    await bus.emit(Event("run_started", run_id="r1"))
    await bus.emit(Event("step_started", run_id="r1"))
    await bus.emit(Event("run_finished", run_id="r1", status="success"))
    unsubscribe()
    unsubscribe()  # twice is harmless
    await bus.emit(Event("run_started", run_id="r2"))
    assert seen == ["run_started", "run_finished"]
    assert len(bus) == 0
    with pytest.raises(ValueError, match="unknown event types"):
        bus.subscribe(print, types=["nope"])


async def test_same_callback_twice_unsubscribes_one_at_a_time() -> None:
    bus = EventBus()
    seen: list[str] = []

    def cb(e: Event) -> None:
        seen.append(e.type)

    first = bus.subscribe(cb)
    bus.subscribe(cb)
    first()
    await bus.emit(Event("tool_registered", tool="t"))
    assert seen == ["tool_registered"]


async def test_failing_subscriber_is_logged_and_the_rest_still_run(caplog: pytest.LogCaptureFixture) -> None:
    bus = EventBus()
    seen: list[str] = []

    def broken(e: Event) -> None:
        raise RuntimeError("subscriber bug")

    async def broken_async(e: Event) -> None:
        raise KeyError("async bug")

    bus.subscribe(broken)
    bus.subscribe(broken_async)
    bus.subscribe(lambda e: seen.append(e.type))
    with caplog.at_level(logging.ERROR, logger="toolagent.events"):
        await bus.emit(Event("execution_denied", tool="shell_exec", reason="level"))
    assert seen == ["execution_denied"]
    messages = [r.getMessage() for r in caplog.records]
    assert any("broken" in m and "execution_denied" in m for m in messages)
    assert any("broken_async" in m for m in messages)
    assert all(r.exc_info for r in caplog.records)


async def test_subscriber_may_unsubscribe_while_called() -> None:
    bus = EventBus()
    seen: list[str] = []
    unsubscribe = bus.subscribe(lambda e: unsubscribe())
    bus.subscribe(lambda e: seen.append(e.type))
    await bus.emit(Event("step_finished"))
    await bus.emit(Event("step_finished"))
    assert seen == ["step_finished", "step_finished"] and len(bus) == 1


async def test_cancellation_is_not_swallowed() -> None:
    bus = EventBus()
    entered = anyio.Event()
    after: list[str] = []

    async def slow(e: Event) -> None:
        entered.set()
        await anyio.sleep_forever()

    bus.subscribe(slow)
    bus.subscribe(lambda e: after.append(e.type))
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def emit() -> None:
                await bus.emit(Event("run_started"))
                after.append("emit returned")

            tg.start_soon(emit)
            await entered.wait()
            tg.cancel_scope.cancel()
    assert after == []


async def test_a_subscriber_with_an_interest_gets_only_the_events_it_wants_and_the_bus_says_which() -> None:
    bus = EventBus()
    seen: list[tuple[str, str | None]] = []
    level = {"min": "failed"}

    def interest(kind: str, status: str | None) -> bool:
        return level["min"] == "all" or status == "failed"

    bus.subscribe(lambda e: seen.append((e.type, e.status)), interest=interest)
    assert not bus.wants("execution_finished", "success")
    assert bus.wants("execution_finished", "failed")
    await bus.emit(Event("execution_finished", status="success"))
    await bus.emit(Event("execution_finished", status="failed"))
    level["min"] = "all"  # asked at the time of each event, not at subscription
    assert bus.wants("execution_started")
    await bus.emit(Event("execution_started"))
    assert seen == [("execution_finished", "failed"), ("execution_started", None)]


async def test_the_bus_wants_an_event_a_plain_subscriber_of_its_type_would_get() -> None:
    bus = EventBus()
    assert not bus.wants("run_started")  # nobody listens
    unsubscribe = bus.subscribe(print, types={"run_finished"}, interest=lambda kind, status: True)
    assert not bus.wants("run_started") and bus.wants("run_finished")
    unsubscribe()
    bus.subscribe(print)
    assert bus.wants("run_started") and bus.wants("tool_registered", "anything")
