"""Tools run in process as `python` servers of mcp.json (tests/integration/test_python_servers.py).

`TOOLS` is a list of functions, `notes` an `MCPServer`, `make_tools` a factory. `hold` and
`hang` report through `STATE`, so a test sees that a cancellation reached the function.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

import anyio
from mcp.server import MCPServer
from pydantic import Field


@dataclass
class State:
    """What the waiting tools saw; reset by each test."""

    entered: Any = None
    """An `anyio.Event` the test creates; set when `hold` starts waiting."""
    cancelled: list[str] = field(default_factory=list)
    """Tools whose wait was cancelled (a timeout or a cancel by id reached them)."""


STATE = State()


def word_count(text: Annotated[str, Field(description="The text to count.")], unique: bool = False) -> dict[str, Any]:
    """Count the words of a text (runs in a worker thread: it is sync).

    Args:
        unique: Count each word once.
    """
    words = text.split()
    return {"words": len(set(words)) if unique else len(words)}


async def echo(text: str) -> str:
    """Say it back.

    Args:
        text: What to say.
    """
    return text


def explode(why: str = "on purpose") -> None:
    """Fail with an error."""
    raise ValueError(f"exploded {why}")


async def hold() -> str:
    """Wait until cancelled (the test cancels the call by its id)."""
    try:
        if STATE.entered is not None:
            STATE.entered.set()
        await anyio.sleep_forever()
    finally:
        STATE.cancelled.append("hold")
    return "unreachable"


async def hang() -> str:
    """Wait until the call's timeout cancels it."""
    try:
        await anyio.sleep_forever()
    finally:
        STATE.cancelled.append("hang")
    return "unreachable"


TOOLS = [word_count, echo, explode, hold, hang]

notes = MCPServer("notes")


@notes.tool()
def add_note(text: str) -> str:
    """Store a note (in memory)."""
    return f"noted: {text}"


def make_tools() -> list[Any]:
    """A factory: the tools are built when the runtime opens."""

    def shout(text: str) -> str:
        """Say it loudly."""
        return text.upper()

    return [shout]


def needs_arguments(prefix: str) -> list[Any]:
    """Not a factory: it takes an argument."""
    return []


NOT_TOOLS = ["a", "b"]
