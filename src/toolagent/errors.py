"""The whole exception tree of toolagent.

```
ToolAgentError                      root; the class docstring is the default message
├── UsageError                      bad command-line or request input (exit 2, HTTP 400)
├── ConfigError                     raised while loading; carries source + field path (exit 2)
│   ├── DefinitionInvalid           an agent definition or record failed validation
│   ├── TemplateError               a template failed to parse or render
│   ├── ServerConfigError           the mcpServers file is wrong
│   └── EnvVarMissing               a required environment variable is not set
├── Unauthenticated                 no valid API key (HTTP 401)
├── NotFound                        an agent, run, execution or deliverable does not exist
├── PolicyError                     the engine refused before calling anything
│   ├── PermissionDenied · RateLimited(retry_after_s) · BudgetExceeded · SqlRejected(reasons)
│   │   └── ExecutionDenied         the gate's refusal, recorded (its execution id)
├── ToolCallError                   the call was attempted (or routing failed)
│   ├── ServerUnavailable · UnknownTool · ArgumentsInvalid
│   ├── ToolTimedOut · CallCancelled · ToolFailed (server said is_error) · UpstreamError (transport/protocol)
├── RunError                        run-level: cancelled, failed
└── StoreError                      database failure, original kept as __cause__
```

Each class declares its `code` (a tRPC error code); `ERROR_CODES` maps every code to the HTTP
status the API answers with and the exit code the CLI ends with — the one table both read.

`ToolCallError` subclasses declare `retryable`, read by the retry layer. Third-party exceptions
are translated in exactly one place per package (`mcp/pool.py`, `sql/guard.py`, `store/db.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Final


@dataclass(frozen=True)
class ErrorCode:
    """How the entry points answer one error code."""

    http_status: int
    """The HTTP status of the API's answer."""
    exit_code: int
    """The CLI's exit code: 1 a run or call failed (or was refused), 2 usage or configuration."""


#: tRPC error code -> HTTP status and CLI exit code.
ERROR_CODES: Final[dict[str, ErrorCode]] = {
    "BAD_REQUEST": ErrorCode(400, 2),
    "UNAUTHORIZED": ErrorCode(401, 1),
    "FORBIDDEN": ErrorCode(403, 1),
    "NOT_FOUND": ErrorCode(404, 1),
    "METHOD_NOT_SUPPORTED": ErrorCode(405, 2),
    "CONFLICT": ErrorCode(409, 1),
    "TOO_MANY_REQUESTS": ErrorCode(429, 1),
    "INTERNAL_SERVER_ERROR": ErrorCode(500, 1),
}
_INTERNAL: Final = ERROR_CODES["INTERNAL_SERVER_ERROR"]


class ToolAgentError(Exception):
    """toolagent failed."""

    #: tRPC-style error code; `ERROR_CODES` gives its HTTP status and exit code.
    code: ClassVar[str] = "INTERNAL_SERVER_ERROR"

    def __init__(self, message: str | None = None) -> None:
        self.message = message or (self.__class__.__doc__ or self.__class__.__name__).strip()
        super().__init__(self.message)

    @property
    def exit_code(self) -> int:
        """The CLI's exit code for this error (from `ERROR_CODES`)."""
        return ERROR_CODES.get(self.code, _INTERNAL).exit_code

    @property
    def http_status(self) -> int:
        """The API's HTTP status for this error (from `ERROR_CODES`)."""
        return ERROR_CODES.get(self.code, _INTERNAL).http_status


class UsageError(ToolAgentError):
    """The command or request was used incorrectly."""

    code = "BAD_REQUEST"


class ConfigError(ToolAgentError):
    """A configuration could not be loaded."""

    code = "BAD_REQUEST"

    def __init__(self, message: str | None = None, *, source: str | None = None, path: str | None = None) -> None:
        self.source = source
        self.path = path
        prefix = ": ".join(p for p in (source, path) if p)
        full = f"{prefix}: {message}" if prefix and message else (message or "")
        super().__init__(full or None)
        self.detail = message or self.message


class DefinitionInvalid(ConfigError):
    """The agent definition is invalid."""

    def __init__(self, problems: list[Problem] | str, *, source: str | None = None) -> None:
        if isinstance(problems, str):
            problems = [Problem(path="", message=problems)]
        self.problems = problems
        self.source = source
        self.path = None
        lines = [p.render(source) for p in problems]
        ToolAgentError.__init__(self, lines[0] if len(lines) == 1 else "\n".join(lines))
        self.detail = self.message


class Problem:
    """One validation problem: a field path and a message that says what to change."""

    __slots__ = ("path", "message")

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message

    def render(self, source: str | None = None) -> str:
        """Format as `source: path: message`, leaving out empty parts."""
        return ": ".join(p for p in (source, self.path, self.message) if p)

    def to_dict(self) -> dict[str, str]:
        """A JSON-friendly form."""
        return {"path": self.path, "message": self.message}

    def __repr__(self) -> str:
        return f"Problem({self.path!r}, {self.message!r})"


class TemplateError(ConfigError):
    """A parameter template could not be parsed or rendered."""


class ServerConfigError(ConfigError):
    """The MCP server configuration is invalid."""


class EnvVarMissing(ConfigError):
    """A required environment variable is not set."""

    def __init__(self, name: str, *, source: str | None = None) -> None:
        self.name = name
        super().__init__(f"Required environment variable {name} is not set", source=source)


class Unauthenticated(ToolAgentError):
    """A valid API key is required: send `Authorization: Bearer <key>` or `X-API-Key: <key>`."""

    code = "UNAUTHORIZED"


class NotFound(ToolAgentError):
    """The requested object does not exist."""

    code = "NOT_FOUND"


class PolicyError(ToolAgentError):
    """The engine refused the call before anything was executed."""

    code = "FORBIDDEN"


class PermissionDenied(PolicyError):
    """The caller is not allowed to run this tool."""


class ExecutionDenied(PermissionDenied):
    """The gate refused the call (FORBIDDEN); it was recorded in history and audit, never sent."""

    def __init__(self, decision: Any, *, tool: str, level: str, risk: str, execution_id: str | None = None) -> None:
        """Args:
        decision: The gate's `Decision` (its `code` and `reason`).
        tool: The qualified tool name.
        level: The caller's level.
        risk: The tool's risk.
        execution_id: The denial's execution record.
        """
        self.decision = decision
        self.denial: str = decision.code or "level"
        self.tool = tool
        self.level = level
        self.risk = risk
        self.execution_id = execution_id
        super().__init__(decision.reason)


class RateLimited(PolicyError):
    """The rate limit for this caller was exceeded."""

    code = "TOO_MANY_REQUESTS"

    def __init__(self, message: str, *, limit: int, remaining: int, retry_after_s: float) -> None:
        self.limit = limit
        self.remaining = remaining
        self.retry_after_s = retry_after_s
        super().__init__(message)


class BudgetExceeded(PolicyError):
    """The monthly tool-call budget of the caller's plan is used up."""

    code = "TOO_MANY_REQUESTS"


class SqlRejected(PolicyError):
    """The SQL statement was rejected by the guard."""

    def __init__(self, reasons: list[str]) -> None:
        self.reasons = reasons
        super().__init__("SQL rejected: " + "; ".join(reasons))


class ToolCallError(ToolAgentError):
    """A tool call failed."""

    retryable: ClassVar[bool] = False


class ServerUnavailable(ToolCallError):
    """MCP server is not available."""

    retryable = True

    def __init__(self, namespace: str, cause: str | None = None) -> None:
        self.namespace = namespace
        self.cause = cause
        msg = f"MCP server is not available: {namespace}"
        super().__init__(f"{msg} ({cause})" if cause else msg)


class UnknownTool(ToolCallError):
    """The tool does not exist on its server."""

    code = "NOT_FOUND"


class ArgumentsInvalid(ToolCallError):
    """The tool arguments do not match the tool's input schema."""

    code = "BAD_REQUEST"


class ToolTimedOut(ToolCallError):
    """The tool call timed out."""

    retryable = True

    def __init__(self, tool: str, timeout_s: float) -> None:
        self.tool = tool
        self.timeout_s = timeout_s
        super().__init__(f"tool '{tool}' timed out after {timeout_s:g} s")


class ToolFailed(ToolCallError):
    """The tool reported an error."""

    def __init__(self, tool: str, message: str, *, result: Any = None) -> None:
        self.tool = tool
        self.result = result
        super().__init__(f"tool '{tool}' failed: {message}")


class CallCancelled(ToolCallError):
    """The call was cancelled before it finished."""


class UpstreamError(ToolCallError):
    """The MCP transport or protocol failed."""

    retryable = True


class RunError(ToolAgentError):
    """The run did not complete."""


class StoreError(ToolAgentError):
    """The store failed."""
