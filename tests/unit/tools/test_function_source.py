"""`FunctionSource`: a function's schema from its signature, hints and docstring; results, errors,
threads and cancellation; `CombinedSource` mounts and collisions."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import date
from enum import Enum
from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel, Field

from toolagent.errors import ConfigError, ServerUnavailable, ToolTimedOut, UnknownTool
from toolagent.model.spec import ToolResult
from toolagent.tools.combined import CombinedSource
from toolagent.tools.function_schema import function_schema, parse_docstring
from toolagent.tools.function_source import FunctionSource, FunctionTool, to_result

pytestmark = pytest.mark.anyio


class Color(Enum):
    RED = "red"
    BLUE = "blue"


class Window(BaseModel):
    start: date
    days: int = 7


def search(
    query: str,
    limit: Annotated[int, Field(ge=1, le=50, description="At most this many (from Field).")] = 10,
    *,
    color: Color | None = None,
    window: Window | None = None,
) -> list[str]:
    """Search the notes.

    Matches whole words.

    Args:
        query: Words to look
            for, on two lines.
        limit (int): Ignored: the Field's description wins.
        color: Only notes of this color.

    Returns:
        The matching notes.
    """
    return [query] * limit


def test_the_schema_comes_from_the_signature_hints_and_docstring() -> None:
    schema = function_schema(search)
    assert schema.description == "Search the notes.\n\nMatches whole words."
    props = schema.input_schema["properties"]
    assert schema.input_schema["required"] == ["query"]
    assert schema.input_schema["additionalProperties"] is False
    assert (props["query"]["type"], props["query"]["description"]) == ("string", "Words to look for, on two lines.")
    assert (props["limit"]["minimum"], props["limit"]["maximum"], props["limit"]["default"]) == (1, 50, 10)
    assert props["limit"]["description"] == "At most this many (from Field)."
    assert props["color"]["description"] == "Only notes of this color."
    assert "description" not in props["window"]
    assert {"Color", "Window"} <= set(schema.input_schema["$defs"])


def test_the_argument_model_converts_what_the_schema_describes() -> None:
    model = function_schema(search).arguments
    parsed = model.model_validate({"query": "x", "color": "blue", "window": {"start": "2026-01-02"}})
    assert parsed.color is Color.BLUE  # type: ignore[attr-defined]
    assert parsed.window == Window(start=date(2026, 1, 2))  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("doc", "description", "params"),
    [
        (None, "", {}),
        ("One line.", "One line.", {}),
        (
            "Text.\n\nArgs:\n    a: First.\n    b (int): Second,\n        continued.\n",
            "Text.",
            {"a": "First.", "b": "Second, continued."},
        ),
        ("Text.\n\nReturns:\n    a: not an argument.\n", "Text.", {}),
        ("Args:\n    *names: Many.\n    **extra: More.", "", {"names": "Many.", "extra": "More."}),
    ],
)
def test_docstrings_are_read_google_style(doc: str | None, description: str, params: dict[str, str]) -> None:
    assert parse_docstring(doc) == (description, params)


def positional(a: int, /) -> None: ...


def star(*values: int) -> None: ...


def bad_hint(a: NoSuchType) -> None: ...  # type: ignore[name-defined] # noqa: F821


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (positional, "parameter 'a' is positional-only; a tool takes named arguments only"),
        (star, "parameter 'values' is variadic positional"),
        (bad_hint, "cannot read its signature or type hints"),
    ],
)
def test_a_function_that_cannot_be_a_tool_is_a_config_error(fn: Any, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        FunctionSource("ns", [fn])
    assert message in info.value.message and f"'{fn.__name__}'" in info.value.message


def test_two_tools_of_one_name_are_an_error() -> None:
    def echo(text: str) -> str:
        return text

    with pytest.raises(ConfigError, match="has two tools named 'echo'"):
        FunctionSource("ns", [echo, echo])


@dataclass
class Point:
    x: int
    y: int


@pytest.mark.parametrize(
    ("value", "structured", "text"),
    [
        ({"a": 1}, {"a": 1}, '{"a": 1}'),
        ("hi", {"result": "hi"}, "hi"),
        ([1, 2], {"result": [1, 2]}, "[1, 2]"),
        (3, {"result": 3}, "3"),
        (None, None, ""),
        (Window(start=date(2026, 1, 2)), {"start": "2026-01-02", "days": 7}, '{"start": "2026-01-02", "days": 7}'),
        (Point(1, 2), {"x": 1, "y": 2}, '{"x": 1, "y": 2}'),
        ({"when": date(2026, 1, 2)}, {"when": "2026-01-02"}, '{"when": "2026-01-02"}'),
    ],
)
def test_return_values_become_structured_content(value: Any, structured: Any, text: str) -> None:
    result = to_result(value)
    assert (result.is_error, result.structured, result.text) == (False, structured, text)


async def call(source: FunctionSource, tool: str, arguments: dict[str, Any]) -> ToolResult:
    return await source.call(await source.tool_spec(f"{source.namespace}/{tool}"), arguments)


async def test_a_sync_function_runs_in_a_worker_thread_an_async_one_in_the_calling_task() -> None:
    def where() -> dict[str, bool]:
        """Which thread."""
        return {"main": threading.current_thread() is threading.main_thread()}

    async def where_async() -> dict[str, bool]:
        """Which thread."""
        return {"main": threading.current_thread() is threading.main_thread()}

    source = FunctionSource("t", [where, where_async])
    assert (await call(source, "where", {})).structured == {"main": False}
    assert (await call(source, "where_async", {})).structured == {"main": True}


async def test_what_a_function_raises_is_a_failed_result_toolagents_errors_keep_their_meaning() -> None:
    def broken(n: int) -> int:
        """Fails."""
        raise KeyError(n)

    def slow() -> None:
        """Says it timed out."""
        raise ToolTimedOut("t/slow", 1)

    source = FunctionSource("t", [broken, slow])
    failed = await call(source, "broken", {"n": 3})
    assert (failed.is_error, failed.text) == (True, "KeyError: 3")
    with pytest.raises(ToolTimedOut):
        await call(source, "slow", {})


async def test_invalid_arguments_are_a_failed_result_naming_the_field() -> None:
    source = FunctionSource("t", [search])
    result = await call(source, "search", {"query": "x", "limit": 99})
    assert result.is_error and result.text.startswith("arguments of 'search' are invalid: limit: ")


async def test_cancelling_the_call_cancels_the_async_function_where_it_awaits() -> None:
    entered, seen = anyio.Event(), []

    async def wait() -> None:
        """Waits forever."""
        entered.set()
        try:
            await anyio.sleep_forever()
        finally:
            seen.append("cancelled")

    source = FunctionSource("t", [wait])
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, source, "wait", {})
            await entered.wait()
            tg.cancel_scope.cancel()
    assert seen == ["cancelled"]


async def test_a_cancelled_sync_function_is_left_to_its_thread_and_the_call_ends() -> None:
    release, started, done = threading.Event(), threading.Event(), threading.Event()

    def block() -> None:
        """Blocks its thread."""
        started.set()
        release.wait(10)
        done.set()

    source = FunctionSource("t", [block])
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, source, "block", {})
            await anyio.to_thread.run_sync(started.wait)
            tg.cancel_scope.cancel()
    assert not done.is_set()  # the call ended while the thread still ran
    release.set()
    await anyio.to_thread.run_sync(done.wait, 5)


async def test_operator_options_win_over_the_tools_defaults() -> None:
    @dataclass
    class Options:
        trusted: bool = True
        sql_tools: tuple[str, ...] = ("query",)

        def risk_for(self, tool: str) -> str | None:
            return "safe" if tool == "query" else None

        def category_for(self, tool: str) -> str | None:
            return "database"

        def timeout_for(self, tool: str) -> float | None:
            return 5.0

    def query(sql: str) -> list[Any]:
        """Run SQL."""
        return []

    source = FunctionSource(
        "db", [FunctionTool.from_function(query, risk="dangerous", category="file")], options=Options()
    )  # type: ignore[arg-type]
    spec = await source.tool_spec("db/query")
    assert (spec.name, spec.risk, spec.category, spec.timeout_s, spec.takes_sql, spec.trusted) == (
        "db/query",
        "safe",
        "database",
        5.0,
        True,
        True,
    )
    assert spec.description == "Run SQL." and spec.input_schema["required"] == ["sql"]


async def test_unknown_tools_and_namespaces_name_what_exists() -> None:
    source = FunctionSource("t", [search])
    with pytest.raises(UnknownTool, match="server 't' has no tool 'nope'; its tools: t/search"):
        await source.tool_spec("t/nope")
    with pytest.raises(ServerUnavailable):
        await source.tool_spec("other/search")


# -- CombinedSource ------------------------------------------------------------------------------


def echo(text: str) -> str:
    """Say it back."""
    return text


async def test_combined_sources_route_each_namespace_to_its_leaf() -> None:
    a, b = FunctionSource("a", [echo]), FunctionSource("b", [search])
    combined = CombinedSource([a, b])
    assert combined.server_names == ["a", "b"]
    listed, errors = await combined.list_servers(["b", "a", "zzz"])
    assert {ns: [s.name for s in specs] for ns, specs in listed.items()} == {"b": ["b/search"], "a": ["a/echo"]}
    assert list(listed) == ["b", "a"]
    assert list(errors) == ["zzz"] and "configured: a, b" in errors["zzz"]
    spec = await combined.tool_spec("a/echo")
    assert (await combined.call(spec, {"text": "hi"})).text == "hi"
    with pytest.raises(ServerUnavailable, match="configured: a, b"):
        await combined.tool_spec("zzz/echo")


def test_a_namespace_mounted_twice_is_an_error_naming_both_origins_and_the_fix() -> None:
    first = FunctionSource("notes", [echo], origin="python server 'notes' (app.tools:TOOLS)")
    second = FunctionSource("notes", [search], origin="python server 'notes' (other.tools:TOOLS)")
    combined = CombinedSource([first])
    with pytest.raises(ConfigError) as info:
        combined.mount(second)
    assert info.value.message == (
        "two tool sources use the namespace 'notes': python server 'notes' (app.tools:TOOLS) and python server "
        "'notes' (other.tools:TOOLS); rename one of them (a namespace is a server's name in mcp.json)"
    )
    assert combined.leaves == [first]


async def test_a_runtime_refuses_a_function_source_over_an_mcp_servers_namespace(tmp_path: Any) -> None:
    from mcp.server import MCPServer

    from toolagent.runtime import Runtime
    from toolagent.testing import in_memory_pool, temp_store

    async with temp_store(tmp_path) as store:
        pool = in_memory_pool({"notes": MCPServer("notes")})
        with pytest.raises(ConfigError, match="namespace 'notes': MCP server 'notes' \\(stdio\\) and Python functions"):
            Runtime(store, pool=pool, sources=[FunctionSource("notes", [echo])])


async def test_a_runtime_calls_function_tools_beside_mcp_servers_through_its_stack(tmp_path: Any) -> None:
    from mcp.server import MCPServer

    from toolagent.testing import in_memory_pool, temp_store, test_runtime
    from toolagent.tools.base import CallContext

    server = MCPServer("mcp")

    @server.tool()
    def ping() -> str:
        """Pong."""
        return "pong"

    async with temp_store(tmp_path) as store:
        pool = in_memory_pool({"mcp": server}, {"mcp": {"risk": "safe"}})
        source = FunctionSource("fn", [FunctionTool.from_function(echo, risk="safe")])
        async with test_runtime(store, pool, sources=[source]) as (runtime, me):
            assert await runtime.catalogue.refresh() == {}
            assert sorted(e.name for e in runtime.registry.entries()) == ["fn/echo", "mcp/ping"]
            fn = await runtime.tools.call("fn/echo", {"text": "hi"}, CallContext(me))
            mcp = await runtime.tools.call("mcp/ping", {}, CallContext(me))
            assert (fn.status, fn.result.text if fn.result else None) == ("ok", "hi")
            assert (mcp.status, mcp.result.text if mcp.result else None) == ("ok", "pong")
            assert fn.record is not None and fn.record.status == "success" and fn.record.risk == "safe"


def test_a_callable_without_a_usable_name_must_be_given_one() -> None:
    with pytest.raises(ConfigError, match="cannot be a tool named '<lambda>'.*pass `name=`"):
        FunctionSource("t", [lambda: None])
    source = FunctionSource("t", [FunctionTool.from_function(lambda: None, name="noop")])
    assert [s.name for s in source.specs] == ["t/noop"]
