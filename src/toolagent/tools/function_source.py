"""`FunctionSource`: Python callables as the tools of one namespace, run in this process.

```python
async def add_note(text: str, tags: list[str] | None = None) -> dict:
    \"\"\"Store a note.

    Args:
        text: The note.
        tags: Words to find it by.
    \"\"\"
    ...

notes = FunctionSource("notes", [add_note])        # the tool `notes/add_note`
```

The schema comes from the signature, type hints and docstring (`tools/function_schema.py`).
A call validates and converts the arguments with the same model, then runs the function: an
async one in the calling task (so a timeout or a cancel by id cancels it where it awaits), a sync
one in a worker thread (a thread cannot be interrupted: a timeout or cancel ends the call at once
and the thread is left to return on its own). The return value becomes the result: a dict, a
pydantic model, a dataclass or any other JSON value is structured content (non-objects, text
included, under `result`, as the MCP SDK does), None is an empty text, a `ToolResult` is kept. An exception the
function raises is a failed result, not a crash (the call is recorded `failed` with its message);
toolagent's own errors keep their meaning (`ToolTimedOut`, `UpstreamError` ...).

`toolagent.testing.StubToolSource` is this source with test conveniences (the calls received).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import anyio.to_thread
from pydantic import BaseModel, ValidationError

from ..errors import ConfigError, ServerUnavailable, ToolAgentError, UnknownTool
from ..model.spec import ToolResult, ToolSpec, qualified, split_name
from .function_schema import function_schema

# What MCP allows in a tool's name (and the agent contract in `namespace/tool`).
_TOOL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
#: A tool that takes its arguments as one dict (a test double's handler); may be async.
Handler = Callable[[dict[str, Any]], Any]


class ToolOptions(Protocol):
    """Operator settings of a namespace (a server's entry in mcp.json)."""

    @property
    def trusted(self) -> bool: ...
    @property
    def sql_tools(self) -> list[str]: ...

    def risk_for(self, tool: str) -> str | None: ...

    def category_for(self, tool: str) -> str | None: ...

    def timeout_for(self, tool: str) -> float | None: ...


@dataclass(frozen=True)
class FunctionTool:
    """One tool: its description, schema and how to run it; the defaults of its spec."""

    name: str
    """Its name in its namespace."""
    run: Callable[[dict[str, Any]], Awaitable[Any]]
    """Runs it with the call's arguments; returns what the function returned."""
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    risk: str | None = None
    """Its risk, unless the operator sets one."""
    category: str | None = None
    """Its category, unless the operator sets one."""
    timeout_s: float | None = None
    takes_sql: bool = False
    annotations: dict[str, Any] = field(default_factory=dict)
    """MCP-style hints (`read_only_hint` ...); they rate risk only on a server marked `trusted`."""
    trusted: bool = False
    errors_are_results: bool = True
    """An exception from the function is a failed result; False: it propagates (as a broken
    transport's would)."""

    @classmethod
    def from_function(cls, fn: Callable[..., Any], *, name: str | None = None, **spec: Any) -> FunctionTool:
        """A tool from a function's signature, type hints and docstring.

        Raises:
            ConfigError: the function cannot be described as a tool.
        """
        tool_name: str = name or str(getattr(fn, "__name__", ""))
        if _TOOL_NAME.fullmatch(tool_name) is None:
            raise ConfigError(
                f"{fn!r} cannot be a tool named {tool_name!r}: a tool name is letters, digits, '_', '-' and '.'; "
                "define it with `def` under the name it should have, or pass `name=`"
            )
        schema = function_schema(fn, name=tool_name)
        is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)

        async def run(arguments: dict[str, Any]) -> Any:
            try:
                parsed = schema.arguments.model_validate(arguments)
            except ValidationError as exc:
                return _failed(f"arguments of '{tool_name}' are invalid: {_first_error(exc)}")
            # Attributes, not model_dump: a parameter typed as a model or a datetime gets one.
            kwargs = {name: getattr(parsed, name) for name in type(parsed).model_fields}
            if is_async:
                return await fn(**kwargs)
            # A thread cannot be interrupted: on a timeout or cancel the call ends now and the
            # thread is left to finish (its result is dropped).
            return await anyio.to_thread.run_sync(functools.partial(fn, **kwargs), abandon_on_cancel=True)

        return cls(tool_name, run, schema.description, schema.input_schema, **spec)

    @classmethod
    def from_handler(
        cls, name: str, handler: Handler, *, input_schema: dict[str, Any] | None = None, **spec: Any
    ) -> FunctionTool:
        """A tool that takes the arguments dict as is and runs in the calling task (a test double)."""

        async def run(arguments: dict[str, Any]) -> Any:
            value = handler(arguments)
            return handler_result(await value if inspect.isawaitable(value) else value)

        spec.setdefault("errors_are_results", False)
        return cls(name, run, input_schema=input_schema or {"type": "object"}, **spec)


class FunctionSource:
    """The tools of one namespace, each a Python callable (a leaf: see `tools/combined.py`)."""

    def __init__(
        self,
        namespace: str,
        tools: Iterable[Callable[..., Any] | FunctionTool] = (),
        *,
        options: ToolOptions | None = None,
        origin: str | None = None,
    ) -> None:
        """Args:
        namespace: The namespace (`namespace/tool`); a server's name in mcp.json.
        tools: Functions (named by `__name__`) or prepared `FunctionTool`s.
        options: The operator's settings (risk, category, timeouts, SQL tools, trust).
        origin: Where the tools come from, for messages (default "Python functions 'namespace'").

        Raises:
            ConfigError: a function cannot be a tool, or two share a name.
        """
        self.namespace = namespace
        self.options = options
        self._origin = origin or f"Python functions '{namespace}'"
        self._tools: dict[str, FunctionTool] = {}
        self._specs: dict[str, ToolSpec] = {}
        for tool in tools:
            self.add(tool, replace=False)

    def add(self, tool: Callable[..., Any] | FunctionTool, *, replace: bool = True) -> ToolSpec:
        """Add a tool (a function or a `FunctionTool`); returns its spec.

        Raises:
            ConfigError: `replace` is False and a tool of that name exists, or the function
                cannot be a tool.
        """
        made = tool if isinstance(tool, FunctionTool) else FunctionTool.from_function(tool)
        if not replace and made.name in self._tools:
            raise ConfigError(
                f"{self._origin} has two tools named '{made.name}': rename one (its function name is its tool name)"
            )
        self._tools[made.name] = made
        spec = self._specs[made.name] = self._spec(made)
        return spec

    def _spec(self, tool: FunctionTool) -> ToolSpec:
        opts = self.options
        return ToolSpec(
            name=qualified(self.namespace, tool.name),
            server=self.namespace,
            tool=tool.name,
            description=tool.description,
            input_schema=tool.input_schema,
            annotations=dict(tool.annotations),
            timeout_s=(opts.timeout_for(tool.name) if opts else None) or tool.timeout_s,
            takes_sql=tool.takes_sql or (opts is not None and tool.name in opts.sql_tools),
            trusted=tool.trusted or (opts is not None and opts.trusted),
            risk=(opts.risk_for(tool.name) if opts else None) or tool.risk,
            category=(opts.category_for(tool.name) if opts else None) or tool.category,
        )

    @property
    def specs(self) -> list[ToolSpec]:
        """Every tool's spec, in the order added."""
        return list(self._specs.values())

    # -- the leaf interface ------------------------------------------------------------------------

    @property
    def server_names(self) -> list[str]:
        """The one namespace."""
        return [self.namespace]

    def origin(self, namespace: str) -> str:
        """Where the tools come from."""
        return self._origin

    async def list_servers(self, names: Iterable[str]) -> tuple[dict[str, list[ToolSpec]], dict[str, str]]:
        """This namespace's tools, if asked for; other names are reported as unknown."""
        listed: dict[str, list[ToolSpec]] = {}
        errors: dict[str, str] = {}
        for name in names:
            if name == self.namespace:
                listed[name] = self.specs
            else:
                errors[name] = ServerUnavailable(name, f"{self._origin} offers only '{self.namespace}'").message
        return listed, errors

    async def list_tools(self, namespace: str) -> list[ToolSpec]:
        """This namespace's tools.

        Raises:
            ServerUnavailable: another namespace.
        """
        if namespace != self.namespace:
            raise ServerUnavailable(namespace, f"{self._origin} offers only '{self.namespace}'")
        return self.specs

    async def tool_spec(self, name: str) -> ToolSpec:
        """The tool `namespace/tool`.

        Raises:
            ServerUnavailable: another namespace.
            UnknownTool: no such tool (the message lists them).
        """
        namespace, tool = split_name(name)
        if namespace != self.namespace:
            raise ServerUnavailable(namespace, f"{self._origin} offers only '{self.namespace}'")
        spec = self._specs.get(tool)
        if spec is None:
            available = ", ".join(sorted(s.name for s in self._specs.values())) or "none"
            raise UnknownTool(f"server '{namespace}' has no tool '{tool}'; its tools: {available}")
        return spec

    async def call(
        self, spec: ToolSpec, arguments: dict[str, Any], *, timeout_s: float | None = None, validate: bool = True
    ) -> ToolResult:
        """Run the tool (the deadline is the stack's timeout layer's, as for MCP tools).

        Raises:
            UnknownTool: no such tool.
            ToolAgentError: what the function raised of toolagent's own errors (its other
                exceptions are a failed result).
        """
        tool = self._tools.get(spec.tool)
        if tool is None:
            raise UnknownTool(f"server '{self.namespace}' has no tool '{spec.tool}'")
        if not tool.errors_are_results:
            return to_result(await tool.run(dict(arguments)))
        try:
            value = await tool.run(dict(arguments))
        except ToolAgentError:
            raise
        except Exception as exc:  # the function's own failure is the tool's answer, not a crash
            return _failed(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        return to_result(value)

    async def __aenter__(self) -> FunctionSource:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        return None


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "arguments"
    return f"{where}: {first['msg']}"


def _failed(text: str) -> ToolResult:
    return ToolResult(True, None, [{"type": "text", "text": text}], text)


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return json.loads(json.dumps(dataclasses.asdict(value), default=str))
    return value


def handler_result(value: Any) -> ToolResult:
    """A test double's return value as a tool result: a dict is structured content, anything else text."""
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, dict):
        text = json.dumps(value, default=str)
        return ToolResult(False, value, [{"type": "text", "text": text}], text)
    text = "" if value is None else str(value)
    return ToolResult(False, None, [{"type": "text", "text": text}], text)


def to_result(value: Any) -> ToolResult:
    """A function's return value as a tool result (see the module docstring)."""
    if isinstance(value, ToolResult):
        return value
    if value is None:
        return ToolResult(False, None, [{"type": "text", "text": ""}], "")
    if isinstance(value, str):
        # As the MCP SDK answers for a function returning text: later steps read `result`.
        return ToolResult(False, {"result": value}, [{"type": "text", "text": value}], value)
    data = _jsonable(value)
    try:
        # Values JSON cannot hold (a datetime, a path) are kept as their text, as they are stored.
        text = json.dumps(data, default=str)
    except (TypeError, ValueError):
        text = str(value)
        return ToolResult(False, None, [{"type": "text", "text": text}], text)
    normalized = json.loads(text)
    structured = normalized if isinstance(normalized, dict) else {"result": normalized}
    return ToolResult(False, structured, [{"type": "text", "text": text}], text)


__all__ = ["FunctionSource", "FunctionTool", "Handler", "ToolOptions", "handler_result", "to_result"]
