"""`CheckedSession.validate_tool_result` accepts and refuses exactly what the SDK's check does,
and leaves the SDK's check out only for results it can vouch for."""

from __future__ import annotations

import random
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.types import CallToolResult

from toolagent.mcp.checked_session import CheckedSession

pytestmark = pytest.mark.anyio

SIMPLE = {
    "type": "object",
    "title": "echoOutput",
    "properties": {"result": {"type": "string"}, "n": {"type": "integer"}},
    "required": ["result"],
}
CLOSED = {**SIMPLE, "additionalProperties": False}
#: Shapes the quick check does not decide: the SDK's check must.
NESTED = {
    "type": "object",
    "properties": {"rows": {"type": "array", "items": {"$ref": "#/$defs/row"}}},
    "$defs": {"row": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}},
}
BOUNDED = {"type": "object", "properties": {"result": {"type": "string", "maxLength": 3}}}
SCHEMAS = {"simple": SIMPLE, "closed": CLOSED, "nested": NESTED, "bounded": BOUNDED}


@pytest.fixture
async def session() -> CheckedSession:
    send, receive = anyio.create_memory_object_stream[Any](1)
    # Never entered: checking a result needs no connection once the tool's schema is known, which
    # a listing leaves in the SDK's cache; here it is put there directly.
    checked = CheckedSession(receive, send)
    for name, schema in SCHEMAS.items():
        checked._tool_output_schemas[name] = schema
    return checked


@pytest.fixture
def sdk_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tools whose results went to the SDK's own check."""
    seen: list[str] = []
    real = ClientSession.validate_tool_result

    async def counted(self: ClientSession, name: str, result: CallToolResult) -> None:
        seen.append(name)
        await real(self, name, result)

    monkeypatch.setattr(ClientSession, "validate_tool_result", counted)
    return seen


def result(content: Any) -> CallToolResult:
    return CallToolResult(content=[], structured_content=content)


async def test_a_result_of_a_simple_schema_skips_the_sdk_check(session: CheckedSession, sdk_checks: list[str]) -> None:
    await session.validate_tool_result("simple", result({"result": "hi", "n": 3}))
    await session.validate_tool_result("closed", result({"result": "hi"}))
    assert sdk_checks == []


@pytest.mark.parametrize(
    ("tool", "content", "why"),
    [
        ("simple", {"result": 5}, "5 is not of type 'string'"),
        ("simple", {"n": 1}, "'result' is a required property"),
        ("closed", {"result": "hi", "extra": 1}, "Additional properties are not allowed"),
        ("bounded", {"result": "long"}, "is too long"),
        ("nested", {"rows": [{"id": "x"}]}, "'x' is not of type 'integer'"),
    ],
)
async def test_a_bad_result_is_refused_with_the_sdks_message(
    session: CheckedSession, sdk_checks: list[str], tool: str, content: Any, why: str
) -> None:
    with pytest.raises(RuntimeError, match=f"Invalid structured content returned by tool {tool}") as info:
        await session.validate_tool_result(tool, result(content))
    assert why in str(info.value) and sdk_checks == [tool]


async def test_a_result_without_structured_content_goes_to_the_sdk(
    session: CheckedSession, sdk_checks: list[str]
) -> None:
    with pytest.raises(RuntimeError, match="did not return structured content"):
        await session.validate_tool_result("simple", CallToolResult(content=[]))
    assert sdk_checks == ["simple"]


def values(rnd: random.Random, depth: int = 0) -> Any:
    kind = rnd.randrange(8 if depth < 2 else 6)
    if kind == 6:
        return {k: values(rnd, depth + 1) for k in rnd.sample(["result", "n", "id", "extra"], rnd.randrange(4))}
    if kind == 7:
        return [values(rnd, depth + 1) for _ in range(rnd.randrange(3))]
    return [None, True, rnd.randint(-3, 3), rnd.random(), rnd.choice(["", "ab", "long text"]), 1.0][kind]


async def test_it_agrees_with_the_sdk_on_random_results(session: CheckedSession) -> None:
    rnd = random.Random(7)
    for _ in range(400):
        tool = rnd.choice(list(SCHEMAS))
        content = values(rnd) if rnd.random() < 0.3 else {"result": values(rnd), "n": values(rnd)}
        if rnd.random() < 0.5 and isinstance(content, dict):
            content.pop("n", None)
        outcomes = []
        # This session's check, then the SDK's alone on the same session (the same schemas).
        for check in (session.validate_tool_result, lambda *a: ClientSession.validate_tool_result(session, *a)):
            try:
                await check(tool, result(content))
                outcomes.append(None)
            except RuntimeError as exc:
                outcomes.append(str(exc))
        assert outcomes[0] == outcomes[1], (tool, content)
