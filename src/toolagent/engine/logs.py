"""Structured logs: JSON lines (or readable text) on stderr, with the execution context, secrets masked.

```python
configure_logging()                      # TOOLAGENT_LOG_FORMAT=json|text, TOOLAGENT_LOG_LEVEL=info
with log_context(execution_id=eid, tool="file_read", user="alice"):
    logger.info("calling %s", tool)      # the line carries execution_id, tool and user
```

The context lives in a `contextvars.ContextVar`, so it follows each task (anyio tasks copy the
context when they start) and never leaks between concurrent executions. Every message, extra
field and traceback goes through `redact_text` / `redact` on the way out.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import IO, Any, TextIO

from ..errors import ConfigError
from ..model.redaction import redact, redact_text
from ..model.status import CallStatus, ExecutionStatus
from ..settings import Settings
from .events import Event, EventBus

#: Environment variable choosing `json` or `text` lines.
LOG_FORMAT_ENV = "TOOLAGENT_LOG_FORMAT"
#: Environment variable choosing the level (`debug`, `info`, `warning`, `error`).
LOG_LEVEL_ENV = "TOOLAGENT_LOG_LEVEL"
#: Level when neither the argument nor the environment sets one.
DEFAULT_LEVEL = "WARNING"
#: Context fields every line carries (when set), in this order.
CONTEXT_FIELDS = ("execution_id", "run_id", "tool", "user")

_context: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar(
    "toolagent_log_context", default=MappingProxyType({})
)

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_RECORD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}
_CONTEXT_ATTR = "toolagent_context"


@contextlib.contextmanager
def log_context(**fields: Any) -> Iterator[Mapping[str, Any]]:
    """Add `fields` to the context of every log line written inside the block (nested blocks merge).

    Fields given as `None` are left out. Yields the merged context.
    """
    merged = {**_context.get(), **{k: v for k, v in fields.items() if v is not None}}
    token = _context.set(merged)
    try:
        yield merged
    finally:
        _context.reset(token)


def current_context() -> dict[str, Any]:
    """The context fields in force here."""
    return dict(_context.get())


class ContextFilter(logging.Filter):
    """Copies the current context onto each record when it is logged (before any queue hop)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, _CONTEXT_ATTR):
            setattr(record, _CONTEXT_ATTR, current_context())
        return True


def _record_context(record: logging.LogRecord) -> dict[str, Any]:
    ctx = getattr(record, _CONTEXT_ATTR, None)
    return dict(ctx) if ctx is not None else current_context()


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _RECORD_ATTRS and k != _CONTEXT_ATTR}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: timestamp, level, logger, message, context, extras, exception."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="microseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": redact_text(record.getMessage()),
        }
        ctx = _record_context(record)
        for key in CONTEXT_FIELDS:
            if key in ctx:
                line[key] = ctx[key]
        for key, value in {**{k: v for k, v in ctx.items() if k not in CONTEXT_FIELDS}, **_extras(record)}.items():
            line.setdefault(key, value)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        # Extras and extra context may come from tool arguments: mask them like the message. The
        # four context ids are the engine's own and are kept as they are, so lines can be joined on them.
        kept = ("timestamp", "level", "logger", "message", *CONTEXT_FIELDS)
        line.update(redact({k: v for k, v in line.items() if k not in kept}))
        return json.dumps(line, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """`TIME LEVEL logger: message [key=value ...]`, secrets masked."""

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        fields = {**_record_context(record), **_extras(record)}
        tail = " ".join(f"{k}={v}" for k, v in redact(fields).items())
        text = f"{when} {record.levelname:<7} {record.name}: {record.getMessage()}" + (f" [{tail}]" if tail else "")
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return redact_text(text)


def _level(value: str | int) -> int:
    if isinstance(value, int):
        return value
    named = logging.getLevelNamesMapping().get(value.strip().upper())
    if named is None:
        raise ConfigError(f"unknown log level {value!r}: use debug, info, warning or error", source=LOG_LEVEL_ENV)
    return named


def configure_logging(
    json: bool | None = None,  # noqa: A002 - the option's name on the command line
    level: str | int | None = None,
    *,
    stream: IO[str] | None = None,
    logger_name: str = "toolagent",
    lifecycle: bool = True,
) -> logging.Handler:
    """Send the `toolagent` loggers to stderr as JSON lines or text, replacing an earlier call's handler.

    Args:
        json: JSON lines; `None` reads `TOOLAGENT_LOG_FORMAT` (`json` or `text`, default text).
        level: Level name or number; `None` reads `TOOLAGENT_LOG_LEVEL` (default warning).
        stream: Where to write (default: `sys.stderr` at the time of each write).
        logger_name: The logger to configure.
        lifecycle: Write the engine's lifecycle lines (`toolagent.lifecycle`) at `level`; False
            keeps only their errors, for a caller that reports denials and failures itself.

    Returns:
        The installed handler.

    Raises:
        ConfigError: The level or format is not known.
    """
    settings = Settings.from_env()
    if json is None:
        fmt = (settings.log_format or "text").strip().lower() or "text"
        if fmt not in ("json", "text"):
            raise ConfigError(f"unknown log format {fmt!r}: use json or text", source=LOG_FORMAT_ENV)
        json = fmt == "json"
    resolved = _level(level if level is not None else (settings.log_level or DEFAULT_LEVEL))
    handler: logging.Handler = _StderrHandler() if stream is None else logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if json else TextFormatter())
    handler.addFilter(ContextFilter())
    handler.set_name("toolagent")
    target = logging.getLogger(logger_name)
    for old in [h for h in target.handlers if h.get_name() == "toolagent"]:
        target.removeHandler(old)
        old.close()
    target.addHandler(handler)
    target.setLevel(resolved)
    logging.getLogger(LIFECYCLE_LOGGER).setLevel(logging.NOTSET if lifecycle else logging.ERROR)
    return handler


class _StderrHandler(logging.StreamHandler[TextIO]):
    # Looks up sys.stderr on every write, so a test runner or CLI runner that swaps it still sees the lines.
    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass


#: Level per event type; `execution_finished` with a status other than success is a warning.
EVENT_LEVELS = {
    "tool_registered": logging.DEBUG,
    "execution_started": logging.DEBUG,
    "execution_finished": logging.INFO,
    "execution_cancelled": logging.INFO,
    "execution_denied": logging.WARNING,
    "run_started": logging.INFO,
    "step_started": logging.DEBUG,
    "step_finished": logging.INFO,
    "run_finished": logging.INFO,
}
_FAILED = frozenset({ExecutionStatus.FAILED, CallStatus.TIMED_OUT})


#: The logger of the lifecycle lines.
LIFECYCLE_LOGGER = "toolagent.lifecycle"


def event_level(event_type: str, status: str | None) -> int:
    """The level of an event's log line: its type's, raised to warning for a failure."""
    level = EVENT_LEVELS.get(event_type, logging.INFO)
    return max(level, logging.WARNING) if status in _FAILED else level


def event_logger(logger: logging.Logger | None = None) -> Callable[[Event], None]:
    """An `EventBus` subscriber that writes one log line per lifecycle event, with its context."""
    log = logger or logging.getLogger(LIFECYCLE_LOGGER)

    def on_event(event: Event) -> None:
        level = event_level(event.type, event.status)
        if not log.isEnabledFor(level):
            return
        parts: list[str] = [event.type]
        if event.tool:
            parts.append(event.tool)
        if event.status:
            parts.append(event.status)
        if event.duration_ms is not None:
            parts.append(f"in {event.duration_ms:.1f} ms")
        if event.reason:
            parts.append(f"— {event.reason}")
        extra: dict[str, Any] = {"event": event.type}
        for key in ("status", "duration_ms", "reason"):
            if getattr(event, key) is not None:
                extra[key] = getattr(event, key)
        if event.data:
            extra["data"] = dict(event.data)
        with log_context(execution_id=event.execution_id, run_id=event.run_id, tool=event.tool, user=event.user):
            log.log(level, " ".join(parts), extra=extra)

    return on_event


def log_events(bus: EventBus, logger: logging.Logger | None = None) -> Callable[[], None]:
    """Subscribe `event_logger(logger)` to `bus`, interested in the events its logger would write
    at the time; returns the unsubscribe function."""
    log = logger or logging.getLogger(LIFECYCLE_LOGGER)
    return bus.subscribe(event_logger(log), interest=lambda kind, status: log.isEnabledFor(event_level(kind, status)))


__all__ = [
    "CONTEXT_FIELDS",
    "DEFAULT_LEVEL",
    "EVENT_LEVELS",
    "LIFECYCLE_LOGGER",
    "LOG_FORMAT_ENV",
    "LOG_LEVEL_ENV",
    "ContextFilter",
    "JsonFormatter",
    "TextFormatter",
    "configure_logging",
    "current_context",
    "event_level",
    "event_logger",
    "log_context",
    "log_events",
]
