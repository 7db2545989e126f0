"""Structured logs: JSON lines with the execution context, secrets masked, lifecycle events logged."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from toolagent.engine.events import Event, EventBus
from toolagent.engine.logs import configure_logging, current_context, log_context, log_events
from toolagent.errors import ConfigError
from toolagent.model.redaction import REDACTED

SECRET = "hunter2hunter2"


@pytest.fixture(autouse=True)
def restore_logger() -> Iterator[None]:
    target = logging.getLogger("toolagent")
    handlers, level = list(target.handlers), target.level
    yield
    for h in list(target.handlers):
        if h not in handlers:
            target.removeHandler(h)
    target.setLevel(level)


@pytest.fixture
def stream() -> io.StringIO:
    return io.StringIO()


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_line_has_the_fields_and_the_context(stream: io.StringIO) -> None:
    configure_logging(json=True, level="debug", stream=stream)
    log = logging.getLogger("toolagent.embedding")
    with log_context(execution_id="exec_1", run_id="run_1", tool="file_read", user="alice"):
        log.info("started %s", "file_read")
    log.debug("outside")
    first, second = lines(stream)
    assert first["message"] == "started file_read"
    assert (first["level"], first["logger"]) == ("info", "toolagent.embedding")
    assert first["timestamp"].endswith("+00:00")
    assert {k: first[k] for k in ("execution_id", "run_id", "tool", "user")} == {
        "execution_id": "exec_1",
        "run_id": "run_1",
        "tool": "file_read",
        "user": "alice",
    }
    assert second["message"] == "outside" and "execution_id" not in second


def test_no_secrets_in_messages_extras_context_or_tracebacks(stream: io.StringIO) -> None:
    configure_logging(json=True, level="info", stream=stream)
    log = logging.getLogger("toolagent.x")
    with log_context(execution_id="exec_2", request_headers={"Authorization": f"Bearer {SECRET}"}):
        log.info("connecting to postgresql://app:%s@db/app", SECRET)
        log.warning("call", extra={"arguments": {"path": "/a", "api_key": SECRET}, "password": SECRET})
        try:
            raise RuntimeError(f"auth failed with token={SECRET}")
        except RuntimeError:
            log.exception("boom")
    text = stream.getvalue()
    assert SECRET not in text
    msg, call, boom = lines(stream)
    assert msg["message"] == f"connecting to postgresql://app:{REDACTED}@db/app"
    assert msg["request_headers"] == {"Authorization": REDACTED}
    assert call["arguments"] == {"path": "/a", "api_key": REDACTED} and call["password"] == REDACTED
    assert "RuntimeError" in boom["exception"] and f"token={REDACTED}" in boom["exception"]
    assert all(line["execution_id"] == "exec_2" for line in (msg, call, boom))


def test_text_format_masks_and_shows_context(stream: io.StringIO) -> None:
    configure_logging(json=False, level="info", stream=stream)
    with log_context(tool="http_request", user="bob"):
        logging.getLogger("toolagent.y").info("header Authorization: Bearer %s", SECRET)
    text = stream.getvalue()
    assert SECRET not in text
    assert "INFO" in text and "toolagent.y" in text and "tool=http_request" in text and "user=bob" in text


def test_environment_chooses_format_and_level(stream: io.StringIO, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLAGENT_LOG_FORMAT", "json")
    monkeypatch.setenv("TOOLAGENT_LOG_LEVEL", "warning")
    configure_logging(stream=stream)
    log = logging.getLogger("toolagent.z")
    log.info("hidden")
    log.warning("shown")
    assert [line["message"] for line in lines(stream)] == ["shown"]


@pytest.mark.parametrize(("env", "value"), [("TOOLAGENT_LOG_LEVEL", "loud"), ("TOOLAGENT_LOG_FORMAT", "xml")])
def test_bad_settings_name_the_variable(monkeypatch: pytest.MonkeyPatch, env: str, value: str) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigError, match=env):
        configure_logging(stream=io.StringIO())


def test_configuring_again_replaces_the_handler(stream: io.StringIO) -> None:
    configure_logging(json=True, level="info", stream=io.StringIO())
    configure_logging(json=True, level="info", stream=stream)
    logging.getLogger("toolagent").info("once")
    assert [line["message"] for line in lines(stream)] == ["once"]
    assert sum(h.get_name() == "toolagent" for h in logging.getLogger("toolagent").handlers) == 1


def test_default_stream_is_stderr_at_write_time(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json=True, level="info")
    logging.getLogger("toolagent").info("to stderr")
    assert json.loads(capsys.readouterr().err.splitlines()[-1])["message"] == "to stderr"


def test_contexts_nest_and_reset() -> None:
    assert current_context() == {}
    with log_context(run_id="r1"):
        with log_context(execution_id="e1", tool=None) as merged:
            assert merged == {"run_id": "r1", "execution_id": "e1"}
        assert current_context() == {"run_id": "r1"}
    assert current_context() == {}


@pytest.mark.anyio
async def test_concurrent_tasks_keep_their_own_context(stream: io.StringIO) -> None:
    configure_logging(json=True, level="info", stream=stream)
    log = logging.getLogger("toolagent.tasks")
    both_in = anyio.Event()
    entered: list[str] = []

    async def one(eid: str) -> None:
        with log_context(execution_id=eid):
            entered.append(eid)
            if len(entered) == 2:
                both_in.set()
            await both_in.wait()
            log.info("running")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(one, "exec_a")
            tg.start_soon(one, "exec_b")
    assert sorted(line["execution_id"] for line in lines(stream)) == ["exec_a", "exec_b"]


@pytest.mark.anyio
async def test_lifecycle_events_are_logged_with_their_context(stream: io.StringIO) -> None:
    configure_logging(json=True, level="debug", stream=stream)
    bus = EventBus()
    unsubscribe = log_events(bus)
    await bus.emit(Event("execution_started", execution_id="exec_9", tool="shell_exec", user="carol"))
    await bus.emit(
        Event(
            "execution_finished",
            execution_id="exec_9",
            tool="shell_exec",
            user="carol",
            status="failed",
            duration_ms=42.0,
            reason=f"exit 1 password={SECRET}",
            data={"risk": "dangerous", "token": SECRET},
        )
    )
    await bus.emit(Event("execution_denied", tool="file_write", user="dave", reason="level execute_basic < admin"))
    unsubscribe()
    await bus.emit(Event("run_started", run_id="run_x"))
    assert SECRET not in stream.getvalue()
    started, finished, denied = lines(stream)
    assert (started["level"], started["event"], started["execution_id"], started["user"]) == (
        "debug",
        "execution_started",
        "exec_9",
        "carol",
    )
    assert finished["level"] == "warning" and finished["status"] == "failed" and finished["duration_ms"] == 42.0
    assert finished["data"] == {"risk": "dangerous", "token": REDACTED}
    assert finished["message"].startswith("execution_finished shell_exec failed in 42.0 ms")
    assert denied["level"] == "warning" and denied["reason"] == "level execute_basic < admin"
    assert denied["logger"] == "toolagent.lifecycle" and denied["tool"] == "file_write"


@pytest.mark.anyio
async def test_lifecycle_lines_can_be_left_to_the_caller(stream: io.StringIO) -> None:
    bus = EventBus()
    unsubscribe = log_events(bus)
    try:
        configure_logging(json=True, level="debug", stream=stream, lifecycle=False)
        await bus.emit(Event("execution_denied", tool="file_write", user="dave", reason="level"))
        assert lines(stream) == []
        configure_logging(json=True, level="debug", stream=stream)  # each call decides afresh
        await bus.emit(Event("execution_denied", tool="file_write", user="dave", reason="level"))
        assert [line["event"] for line in lines(stream)] == ["execution_denied"]
    finally:
        unsubscribe()


def test_the_lifecycle_writer_wants_only_the_events_its_level_writes(stream: io.StringIO) -> None:
    bus = EventBus()
    unsubscribe = log_events(bus)
    try:
        configure_logging(json=True, level="warning", stream=stream)
        assert not bus.wants("execution_started") and not bus.wants("execution_finished", "success")
        assert bus.wants("execution_finished", "failed") and bus.wants("execution_denied")
        configure_logging(json=True, level="debug", stream=stream)  # the level as it is when asked
        assert bus.wants("execution_started") and bus.wants("execution_finished", "success")
    finally:
        unsubscribe()
