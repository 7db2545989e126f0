"""What the gateway tells a client about a tool and a call, from toolagent's own records."""

from __future__ import annotations

import pytest

from toolagent.gateway.http import origin_allowed
from toolagent.gateway.server import call_result, spelled_digest, tool_annotations
from toolagent.model.entry import ToolEntry
from toolagent.model.redaction import redact
from toolagent.model.spec import ToolResult, ToolSpec
from toolagent.model.status import CallStatus
from toolagent.tools.base import CallOutcome

PERMISSIVE = {"read_only_hint": True, "destructive_hint": False, "idempotent_hint": True, "open_world_hint": False}


def entry(risk: str, **hints: bool) -> ToolEntry:
    return ToolEntry(ToolSpec("s/t", "s", "t", annotations=hints), "general", risk, "operator")


@pytest.mark.parametrize(
    ("risk", "read_only", "destructive", "idempotent"),
    [("safe", True, False, True), ("moderate", False, False, None), ("dangerous", False, True, None)],
)
def test_annotations_are_never_more_permissive_than_the_risk(
    risk: str, read_only: bool, destructive: bool, idempotent: bool | None
) -> None:
    hints = tool_annotations(entry(risk, **PERMISSIVE))
    assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint) == (read_only, destructive, idempotent)


def test_without_hints_a_moderate_tool_counts_as_destructive_and_open_world() -> None:
    hints = tool_annotations(entry("moderate"))
    assert hints.destructive_hint is True and hints.open_world_hint is True


def test_the_digest_survives_redaction_whole() -> None:
    digest = "0123456789abcdef" * 4
    spelled = spelled_digest(digest)
    assert spelled.replace("sha256:", "").replace(".", "") == digest
    assert redact({"toolList": spelled}) == {"toolList": spelled}


def test_a_denial_is_an_error_result_naming_the_reason_and_the_record() -> None:
    outcome = CallOutcome(CallStatus.DENIED, "s/t", "exec_1", reason="user 'bob' (execute_basic) may not run 's/t'")
    result = call_result(outcome)
    assert result.is_error is True
    assert result.content[0].text == "denied: user 'bob' (execute_basic) may not run 's/t'"
    assert result.meta == {"toolagent/executionId": "exec_1"}


def test_a_success_carries_content_and_structured_content() -> None:
    tool_result = ToolResult(False, {"x": 1}, [{"type": "text", "text": "1"}], "1")
    result = call_result(CallOutcome(CallStatus.OK, "s/t", "exec_2", result=tool_result))
    assert result.is_error is False and result.structured_content == {"x": 1}
    assert result.content[0].text == "1"


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("http://localhost:5173", True),
        ("http://127.0.0.1:8080", True),
        ("http://localhost.evil.example:80", False),
        ("http://evil.example", False),
        ("https://app.example.com", True),
        ("https://app.example.com.evil", False),
    ],
)
def test_origins_are_matched_exactly_or_by_any_port(origin: str, allowed: bool) -> None:
    assert origin_allowed(origin, ["http://127.0.0.1:*", "http://localhost:*", "https://app.example.com"]) is allowed
