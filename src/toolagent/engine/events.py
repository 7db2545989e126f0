"""Lifecycle events other code can subscribe to: tool registration, executions, BUILD runs.

The engine and the BUILD runner `await bus.emit(Event(...))`; subscribers (the log writer, the
API's live feeds, tests) receive every event in the order emitted. Subscribers run one after
another inside `emit`, so a slow one slows the emitter; there are no background tasks. A
subscriber that raises is logged and skipped: it never breaks the execution that emitted.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, get_args

EventType = Literal[
    "tool_registered",
    "execution_started",
    "execution_finished",
    "execution_cancelled",
    "execution_denied",
    "run_started",
    "step_started",
    "step_finished",
    "run_finished",
]
#: Every event type, for validation and for `subscribe(types=...)`.
EVENT_TYPES: frozenset[str] = frozenset(get_args(EventType))

#: A subscriber: a plain function or a coroutine function taking the event.
Subscriber = Callable[["Event"], "Awaitable[None] | None"]
#: What a subscriber acts on: `(event type, status)` -> whether an event so typed would change anything.
Interest = Callable[[str, "str | None"], bool]

logger = logging.getLogger("toolagent.events")


@dataclass(frozen=True)
class Event:
    """One lifecycle event."""

    type: EventType
    """What happened."""
    timestamp: datetime = field(default_factory=lambda: datetime.now(UTC))
    """When, in UTC."""
    execution_id: str | None = None
    """The execution, for `execution_*` and `step_*` events."""
    run_id: str | None = None
    """The BUILD run, for `run_*` and `step_*` events (and executions made by a run)."""
    tool: str | None = None
    """The qualified tool name."""
    user: str | None = None
    """Who asked."""
    status: str | None = None
    """The outcome for `*_finished` events: `success`, `failed`, `cancelled`, ..."""
    duration_ms: float | None = None
    """How long it took, for `*_finished` and `execution_cancelled`."""
    reason: str | None = None
    """Why it was denied, cancelled or failed."""
    data: Mapping[str, Any] = field(default_factory=dict)
    """Anything else: risk, category, step position, error details."""

    def __post_init__(self) -> None:
        if self.type not in EVENT_TYPES:
            raise ValueError(f"unknown event type {self.type!r}; expected one of {sorted(EVENT_TYPES)}")
        # A copy, so the emitter changing its dict afterwards does not change the event.
        object.__setattr__(self, "data", dict(self.data))

    def to_json(self) -> dict[str, Any]:
        """A JSON-friendly dict (timestamp as an ISO string; unset fields left out)."""
        out: dict[str, Any] = {"type": self.type, "timestamp": self.timestamp.isoformat()}
        for key in ("execution_id", "run_id", "tool", "user", "status", "duration_ms", "reason"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.data:
            out["data"] = dict(self.data)
        return out


class EventBus:
    """Delivers events to subscribers, in subscription order."""

    def __init__(self) -> None:
        self._subscribers: list[tuple[Subscriber, frozenset[str] | None, Interest | None]] = []

    def subscribe(
        self, callback: Subscriber, *, types: Iterable[str] | None = None, interest: Interest | None = None
    ) -> Callable[[], None]:
        """Call `callback(event)` for every event (or only those of `types`); sync or async.

        Args:
            callback: The subscriber.
            types: The event types it gets (None: all).
            interest: When given, it gets only the events for which `interest(type, status)`
                answers True at the time they happen (a log writer: those at an enabled level),
                and an emitter may skip making an event no subscriber is interested in (`wants`).

        Returns:
            A function that unsubscribes; calling it twice is harmless.

        Raises:
            ValueError: `types` names an unknown event type.
        """
        wanted = None if types is None else frozenset(types)
        if wanted is not None and not wanted <= EVENT_TYPES:
            raise ValueError(
                f"unknown event types {sorted(wanted - EVENT_TYPES)}; expected some of {sorted(EVENT_TYPES)}"
            )
        entry = (callback, wanted, interest)
        self._subscribers.append(entry)

        def unsubscribe() -> None:
            # Identity, not equality: the same callback may be subscribed twice.
            self._subscribers = [s for s in self._subscribers if s is not entry]

        return unsubscribe

    def __len__(self) -> int:
        return len(self._subscribers)

    def wants(self, kind: str, status: str | None = None) -> bool:
        """Whether an event of type `kind` with `status` would reach a subscriber now. Every
        governed call emits two or three events, which a server logging at its default level
        drops: the emitter asks first and skips making them."""
        return any(_matches(entry, kind, status) for entry in self._subscribers)

    async def emit(self, event: Event) -> None:
        """Deliver `event` to every matching subscriber; a failing subscriber is logged, never raised.

        Cancellation is not swallowed: if the emitting task is cancelled while an async
        subscriber runs, the cancellation propagates.
        """
        # A copy, so a subscriber that (un)subscribes while being called does not skip anyone.
        for entry in list(self._subscribers):
            if not _matches(entry, event.type, event.status):
                continue
            callback = entry[0]
            try:
                result = callback(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                logger.exception("event subscriber %s failed on %s", _name(callback), event.type)


def _matches(entry: tuple[Subscriber, frozenset[str] | None, Interest | None], kind: str, status: str | None) -> bool:
    """Whether the subscription `entry` gets an event of type `kind` with `status`."""
    _callback, wanted, interest = entry
    return (wanted is None or kind in wanted) and (interest is None or interest(kind, status))


def _name(callback: Any) -> str:
    return getattr(callback, "__qualname__", None) or repr(callback)


__all__ = ["EVENT_TYPES", "Event", "EventBus", "EventType", "Interest", "Subscriber"]
