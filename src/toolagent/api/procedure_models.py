"""The tools router's inputs and outputs, shared by the REST routes, the tRPC endpoint and OpenAPI.

Inputs are validated pydantic models (unknown keys refused); outputs document the dicts the
procedures build (`procedures.py`) for the schema and for tests.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from ..engine.history import DEFAULT_LIMIT, MAX_LIMIT, MAX_OFFSET, MIN_LIMIT
from ..model.execution import MAX_TIMEOUT_MS, MIN_TIMEOUT_MS
from ..model.status import ExecutionStatus
from ..tools.under_agent import AGENT_METADATA_KEY

Category = Literal["browser", "file", "shell", "web", "database", "ai", "system", "workflow", "memory", "agent"]
Status = ExecutionStatus


# -- inputs ------------------------------------------------------------------------------------


def _iso_only(value: Any) -> Any:
    # pydantic would also take numbers (and numeric strings) as Unix times; the API promises ISO 8601.
    if isinstance(value, str):
        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an ISO 8601 date or date-time, e.g. 2025-01-31T12:00:00Z") from None
        return value
    if isinstance(value, datetime):
        return value
    raise ValueError("expected an ISO 8601 date or date-time string")


IsoDateTime = Annotated[datetime, BeforeValidator(_iso_only)]


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ListToolsInput(_Input):
    """listTools: discovery filters."""

    category: Category | None = Field(default=None, description="Only tools of this category.")
    tags: list[str] = Field(default_factory=list, description="Only tools carrying every one of these tags.")
    includeDeprecated: bool = Field(default=False, description="Keep deprecated tools (left out by default).")
    search: str | None = Field(default=None, max_length=200, description="Substring of the name, title or description.")


class ExecutionContextInput(_Input):
    """The caller's execution context, stored with the execution."""

    sessionId: str | None = Field(default=None, max_length=200, description="The caller's session id.")
    metadata: dict[str, Any] | None = Field(
        default=None, description="Free-form metadata (stored redacted); the key `agent` is reserved (see `agent`)."
    )

    @field_validator("metadata")
    @classmethod
    def _no_agent_key(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and AGENT_METADATA_KEY in value:
            raise ValueError(f"the key '{AGENT_METADATA_KEY}' is reserved: name the agent with `agent` (`org/slug`)")
        return value


class ExecuteToolInput(_Input):
    """executeTool: what to run, with which arguments, for how long at most."""

    name: str = Field(min_length=1, max_length=300, description="Qualified tool name `server/tool`, e.g. `file/read`.")
    arguments: dict[str, Any] = Field(
        default_factory=dict, description="Tool arguments, checked against its input schema."
    )
    timeout: int | None = Field(
        default=None,
        ge=MIN_TIMEOUT_MS,
        le=MAX_TIMEOUT_MS,
        description="Milliseconds, 1000..300000; default: the tool's server config, else the engine's default.",
    )
    context: ExecutionContextInput | None = Field(default=None, description="Session id and metadata.")
    agent: str | None = Field(
        default=None,
        max_length=401,
        pattern=r"^[^/\s\x00]+/[^/\s\x00]+$",
        description="Make the call under this agent (`org/slug`): the tool must be in its tool list, and its "
        "`security` block (SQL denylist, table allowlist) applies, as in a BUILD step.",
    )
    async_: bool = Field(
        default=False,
        alias="async",
        description="Answer 202 with the execution id at once and run in the background (poll getToolStatus).",
    )


class ExecutionIdInput(_Input):
    """getToolStatus / cancelToolExecution: one execution."""

    executionId: str = Field(min_length=1, max_length=100, description="`exec_...` id from executeTool.")


class HistoryInput(_Input):
    """getToolHistory: filters and paging."""

    toolName: str | None = Field(default=None, max_length=300, description="Only this qualified tool.")
    category: Category | None = Field(default=None, description="Only this category.")
    limit: int = Field(default=DEFAULT_LIMIT, ge=MIN_LIMIT, le=MAX_LIMIT, description="Page size, 1..100.")
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET, description=f"Rows to skip, 0..{MAX_OFFSET}.")
    status: Status | None = Field(default=None, description="Only this status.")
    startDate: IsoDateTime | None = Field(default=None, description="Started at or after (UTC when no zone is given).")
    endDate: IsoDateTime | None = Field(default=None, description="Started before (UTC when no zone is given).")
    allUsers: bool = Field(default=False, description="Everyone's executions (admins only).")
    userId: str | None = Field(default=None, max_length=200, description="One user's executions (admins only).")


class MetricsInput(_Input):
    """getToolMetrics: all tools, or one."""

    toolName: str | None = Field(default=None, max_length=300, description="One tool's figures as `registryMetrics`.")


class ToolNameInput(_Input):
    """getToolDetails: one tool."""

    name: str = Field(min_length=1, max_length=300, description="Qualified tool name.")


class NoInput(_Input):
    """getActiveExecutions takes no input."""


# -- outputs (documentation and schema checks; the dicts are built by the engine's to_json) ------


class _Output(BaseModel):
    model_config = ConfigDict(extra="allow")


class ToolOut(_Output):
    """A registered tool."""

    name: str
    description: str
    inputSchema: dict[str, Any]
    category: str
    categorySource: str = "default"
    risk: str
    riskSource: str
    tags: list[str]
    version: str | None
    deprecated: bool
    enabled: bool
    server: str
    title: str | None
    outputSchema: dict[str, Any] | None = None
    runnable: bool | None = None


class UserOut(_Output):
    """The user the API key belongs to, whom the answer is for."""

    name: str
    level: str


class ListToolsOutput(_Output):
    """listTools."""

    success: bool
    user: UserOut
    tools: list[ToolOut]
    categorizedTools: dict[str, list[ToolOut]]
    totalCount: int
    categories: list[str]


class ToolResultOut(_Output):
    """What a tool returned."""

    isError: bool
    structuredContent: dict[str, Any] | None
    content: list[dict[str, Any]]
    text: str


class ExecutionOut(_Output):
    """One execution (getToolStatus, history, active)."""

    id: str
    toolName: str
    category: str
    risk: str
    status: Status
    userId: str
    level: str | None
    apiKeyId: str | None
    sessionId: str | None
    runId: str | None
    metadata: dict[str, Any] | None
    arguments: Any
    timeout: int | None = Field(
        deprecated=True,
        description="Deprecated (removed in the next release): `timeoutMs`, the same value.",
        default=None,
    )
    timeoutMs: int | None = Field(default=None, description="The call's timeout, in milliseconds.")
    startTime: datetime
    endTime: datetime | None
    executionTime: float | None = Field(
        deprecated=True,
        description="Deprecated (removed in the next release): `executionTimeMs`, the same value.",
        default=None,
    )
    executionTimeMs: float | None = Field(default=None, description="How long the call took, in milliseconds.")
    result: ToolResultOut | None
    error: str | None
    reason: str | None
    denied: bool
    denial: str | None
    runningTime: float | None = Field(
        deprecated=True,
        description="Deprecated (removed in the next release): `runningTimeMs`, the same value.",
        default=None,
    )
    runningTimeMs: float | None = Field(
        default=None, description="A running call: how long it has run, in milliseconds."
    )
    cancelRequestedBy: str | None = None


class ExecuteToolOutput(_Output):
    """executeTool, waited for."""

    success: bool
    executionId: str
    status: Status
    result: ToolResultOut | None
    toolName: str
    executionTime: float | None = Field(
        deprecated=True,
        description="Deprecated (removed in the next release): `executionTimeMs`, the same value.",
        default=None,
    )
    executionTimeMs: float | None = Field(default=None, description="How long the call took, in milliseconds.")
    timestamp: datetime


class ExecutionLinks(_Output):
    """Where to follow an execution started in the background."""

    status: str
    cancel: str


class ExecuteAcceptedOutput(_Output):
    """executeTool with `async: true` (HTTP 202)."""

    success: bool
    executionId: str
    status: Status
    toolName: str
    timestamp: datetime
    links: ExecutionLinks


class ToolStatusOutput(_Output):
    """getToolStatus."""

    success: bool
    execution: ExecutionOut


class CancelOutput(_Output):
    """cancelToolExecution."""

    success: bool
    executionId: str
    status: Status
    message: str
    timestamp: datetime


class ActiveOutput(_Output):
    """getActiveExecutions."""

    success: bool
    executions: list[ExecutionOut]
    count: int


class StatsOut(_Output):
    """History statistics."""

    total: int
    success: int
    failed: int
    cancelled: int
    averageExecutionTime: float = Field(
        deprecated=True,
        description="Deprecated (removed in the next release): `averageExecutionTimeMs`, the same value.",
        default=0.0,
    )
    averageExecutionTimeMs: float = Field(
        default=0.0, description="Average duration of the calls that ended, in milliseconds."
    )


class HistoryOutput(_Output):
    """getToolHistory."""

    success: bool
    executions: list[ExecutionOut]
    totalCount: int
    limit: int
    offset: int
    stats: StatsOut


class UserStatsOut(_Output):
    """A user's own figures."""

    totalExecutions: int
    successfulExecutions: int
    failedExecutions: int
    averageExecutionTime: float = Field(
        deprecated=True,
        description="Deprecated (removed in the next release): `averageExecutionTimeMs`, the same value.",
        default=0.0,
    )
    averageExecutionTimeMs: float = Field(
        default=0.0, description="Average duration of the calls that ended, in milliseconds."
    )
    cancelledExecutions: int | None = None
    lastExecuted: datetime | None = None


class ToolMetricsOut(_Output):
    """One tool's figures."""

    tool: str
    category: str
    totalInvocations: int
    successfulInvocations: int
    failedInvocations: int
    cancelledInvocations: int
    averageExecutionTime: float = Field(
        deprecated=True,
        description="Deprecated (removed in the next release): `averageExecutionTimeMs`, the same value.",
        default=0.0,
    )
    averageExecutionTimeMs: float = Field(
        default=0.0, description="Average duration of the calls that ended, in milliseconds."
    )
    lastInvoked: datetime | None


class ToolCount(_Output):
    """A tool and how often it ran."""

    tool: str
    count: int


class MetricsOutput(_Output):
    """getToolMetrics."""

    success: bool
    registryMetrics: dict[str, Any]
    activeExecutions: int
    userStats: UserStatsOut | None
    categoryStats: dict[str, int]
    toolUsageStats: dict[str, int]
    mostUsedTools: list[ToolCount]
    timestamp: datetime


class ToolDetailsOutput(_Output):
    """getToolDetails."""

    success: bool
    tool: ToolOut
    metrics: ToolMetricsOut
    userStats: UserStatsOut
    user: UserOut
    timeoutMs: int = Field(description="A call's timeout when it gives none, in milliseconds.")
    timeoutSource: Literal["server", "engine"] = Field(
        description="`server`: the server's `timeout_s` in the MCP config; `engine`: the engine's default."
    )


class ErrorInfo(BaseModel):
    """What went wrong."""

    code: str = Field(
        description="BAD_REQUEST, UNAUTHORIZED, FORBIDDEN, NOT_FOUND, TOO_MANY_REQUESTS, INTERNAL_SERVER_ERROR."
    )
    message: str = Field(description="What to change.")
    details: Any = Field(default=None, description="Invalid fields, or the execution a failure or refusal belongs to.")


class ErrorOutput(BaseModel):
    """Every error response."""

    success: bool
    error: ErrorInfo


__all__ = [
    "ActiveOutput",
    "CancelOutput",
    "Category",
    "ErrorInfo",
    "ErrorOutput",
    "ExecuteAcceptedOutput",
    "ExecuteToolInput",
    "ExecuteToolOutput",
    "ExecutionContextInput",
    "ExecutionIdInput",
    "ExecutionLinks",
    "ExecutionOut",
    "HistoryInput",
    "HistoryOutput",
    "IsoDateTime",
    "ListToolsInput",
    "ListToolsOutput",
    "MetricsInput",
    "MetricsOutput",
    "NoInput",
    "StatsOut",
    "Status",
    "ToolCount",
    "ToolDetailsOutput",
    "ToolMetricsOut",
    "ToolNameInput",
    "ToolOut",
    "ToolResultOut",
    "ToolStatusOutput",
    "UserStatsOut",
    "_Input",
    "_Output",
]
