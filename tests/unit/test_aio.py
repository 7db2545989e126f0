"""`toolagent._aio.others_ready`: whether another callback waits for the event loop's next turn."""

from __future__ import annotations

import anyio
import pytest

from toolagent._aio import others_ready

pytestmark = pytest.mark.anyio


async def test_a_task_just_started_is_ready_and_a_quiet_loop_has_nothing_ready() -> None:
    ran = anyio.Event()

    async def run() -> None:
        ran.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        started = others_ready()
        await ran.wait()
    quiet = [others_ready() for _ in range(5) if await anyio.sleep(0.01) is None]
    assert started is True
    assert False in quiet  # between turns with nothing due, nothing waits


def test_outside_an_event_loop_the_answer_is_yes() -> None:
    assert others_ready() is True
