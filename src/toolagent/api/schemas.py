"""Bodies of the agents, runs and deliverables routes: request models (strict) and response models.

Request models forbid unknown keys, so a misspelled key is a 400 naming it. Response models
document the answers in the OpenAPI document; they allow extra keys, so a field added to a
record's JSON form reaches clients before its documentation does. Agent records keep the
`agents` table's column names (snake_case); runs, steps and deliverables use the API's camelCase.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..agents.loaders import DEFAULT_MODE_PROFILE
from ..agents.models import ExecutionMode
from ..model.status import RunStatus, StepStatus

# -- requests ------------------------------------------------------------------------------------


class BuildRequest(BaseModel):
    """A BUILD request: the payload plus optional overrides."""

    model_config = ConfigDict(extra="forbid")

    payload: dict[str, Any] = Field(default_factory=dict, description="Read by templates as `payload.*`.")
    tools: list[str] | None = Field(default=None, description="Replaces the agent's tool list (`namespace/tool` each).")
    toolParams: dict[str, dict[str, Any]] | None = Field(
        default=None, description="Merged per tool over the agent's own (the request's keys win)."
    )
    toolExecutionMode: ExecutionMode | None = Field(default=None, description="`sequential` or `parallel`.")
    stopOnError: bool | None = Field(default=None, description="End the run at the first failed step.")
    format: Literal["json", "markdown", "text"] | None = Field(
        default=None, description="Deliverable format instead of the agent's own."
    )
    metadata: dict[str, Any] = Field(default_factory=dict, description="Read by templates as `metadata.*`.")
    async_: bool = Field(
        default=False,
        alias="async",
        description="Answer 202 with the run id once the run is recorded; follow `/api/runs/{id}/events`.",
    )

    def overrides(self) -> dict[str, Any]:
        """The override keys that were given."""
        out: dict[str, Any] = {}
        for key in ("tools", "toolParams", "toolExecutionMode", "stopOnError"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value.value if isinstance(value, ExecutionMode) else value
        return out


#: Mode profiles an agent record may have: tool agents run BUILD only.
MODE_PROFILES = (DEFAULT_MODE_PROFILE,)


class AgentUpsert(BaseModel):
    """The agent record for PUT. `organization_slug` and `slug` come from the path; when the
    body carries them too (a seed record sent as it is), they must match it. Only `yaml` is
    required: the other columns default from the definition's `metadata`. A body sent as
    `Content-Type: application/yaml` is the definition itself (the `yaml` field alone)."""

    model_config = ConfigDict(extra="forbid")

    organization_slug: str | None = Field(default=None, description="Must equal the path's `{org}` when given.")
    slug: str | None = Field(default=None, description="Must equal the path's `{slug}` when given.")
    display_name: str | None = Field(
        default=None, min_length=1, description="Human-readable name (default: `metadata.displayName`, else `name`)."
    )
    agent_type: str | None = Field(
        default=None, min_length=1, description="Agent type, e.g. `tool` (default: `metadata.type`)."
    )
    mode_profile: str | None = Field(
        default=None, description=f"Mode profile: {', '.join(f'`{p}`' for p in MODE_PROFILES)} (the default)."
    )
    status: str | None = Field(default=None, min_length=1, description="Lifecycle status (default `active`).")
    yaml: str = Field(min_length=1, description="The agent definition as a YAML or JSON string.")
    description: str | None = Field(default=None, description="What the agent does.")
    context: Any = Field(default=None, description="Optional context (text or JSON).")
    plan_structure: Any = Field(default=None, description="Optional plan structure.")
    deliverable_structure: Any = Field(default=None, description="Optional deliverable structure.")
    io_schema: Any = Field(default=None, description="Optional input/output schema.")
    config: Any = Field(default=None, description="Optional extra configuration.")
    version: str | None = Field(default=None, description="Record version, e.g. `0.1.0`.")

    @field_validator("mode_profile")
    @classmethod
    def _known_profile(cls, value: str | None) -> str | None:
        if value is not None and value not in MODE_PROFILES:
            raise ValueError(f"unknown mode profile {value!r}: use {', '.join(repr(p) for p in MODE_PROFILES)}")
        return value

    def record_fields(self) -> dict[str, Any]:
        """The record's columns other than the key (the ones not given left out)."""
        return self.model_dump(exclude={"organization_slug", "slug"}, exclude_none=True)


# -- responses -----------------------------------------------------------------------------------


class _Output(BaseModel):
    model_config = ConfigDict(extra="allow")


class AgentOut(_Output):
    """A stored agent record (the `agents` table's columns) with the outcome of validating its definition."""

    organization_slug: str
    slug: str
    display_name: str
    agent_type: str
    mode_profile: str
    status: str
    yaml: str
    description: str | None = None
    context: Any = None
    plan_structure: Any = None
    deliverable_structure: Any = None
    io_schema: Any = None
    config: Any = None
    version: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    valid: bool = Field(description="The definition passes validation.")
    tools: list[str] | None = Field(default=None, description="Its tool list, when valid.")
    error: str | None = Field(default=None, description="Why it is invalid, when it is not.")


class AgentListOutput(_Output):
    """GET /api/agents."""

    success: bool
    agents: list[AgentOut]
    totalCount: int


class AgentOutput(_Output):
    """GET /api/agents/{org}/{slug}."""

    success: bool
    agent: AgentOut
    definition: dict[str, Any] = Field(description="The validated definition with its defaults filled in.")


class AgentUpsertOutput(_Output):
    """PUT /api/agents/{org}/{slug}."""

    success: bool
    outcome: Literal["inserted", "updated", "unchanged"]
    agent: AgentOut


class AgentDeleteOutput(_Output):
    """DELETE /api/agents/{org}/{slug}."""

    success: bool
    deleted: str = Field(description="`org/slug`.")


class StepOut(_Output):
    """One step of a run."""

    position: int
    tool: str
    status: StepStatus
    params: dict[str, Any] | None = None
    paramSources: dict[str, str] | None = None
    result: dict[str, Any] | None = Field(default=None, description="isError, structuredContent, content, text.")
    error: str | None = Field(default=None, description="Why it failed, was denied, skipped or cancelled.")
    startedAt: str | None = None
    endedAt: str | None = None
    durationMs: float | None = None


class RunOut(_Output):
    """A BUILD run with its steps."""

    id: str
    agent: str = Field(description="`org/slug`.")
    agentVersion: str | None = None
    user: str | None = None
    status: RunStatus
    executionMode: str
    stopOnError: bool
    payload: Any = None
    overrides: Any = None
    error: str | None = None
    startedAt: str | None = None
    endedAt: str | None = None
    durationMs: float | None = None
    deliverableId: str | None = None
    steps: list[StepOut]


class DeliverableOut(_Output):
    """A run's deliverable: `content` rendered in `format`, `data` structured, run `metadata`."""

    id: str
    runId: str
    format: str
    type: str
    content: str
    data: Any = None
    metadata: dict[str, Any] | None = Field(
        default=None,
        description="toolsExecuted, successfulTools, failedTools, executionMode, stopOnError, toolsUsed, ...",
    )
    createdAt: str | None = None


class BuildOutput(_Output):
    """POST /api/agents/{org}/{slug}/build (sync): `success` is whether the run succeeded."""

    success: bool
    run: RunOut
    deliverable: DeliverableOut


class RunLinks(_Output):
    """Where to follow a run."""

    run: str
    events: str
    cancel: str


class BuildAcceptedOutput(_Output):
    """POST /api/agents/{org}/{slug}/build with `async: true` (HTTP 202)."""

    success: bool
    runId: str
    status: RunStatus
    links: RunLinks


class RunSummaryOut(_Output):
    """A BUILD run without its steps (GET /api/runs)."""

    id: str
    agent: str = Field(description="`org/slug`.")
    agentVersion: str | None = None
    user: str | None = None
    status: RunStatus
    executionMode: str
    stopOnError: bool
    payload: Any = None
    overrides: Any = None
    error: str | None = None
    startedAt: str | None = None
    endedAt: str | None = None
    durationMs: float | None = None
    deliverableId: str | None = None


class RunListOutput(_Output):
    """GET /api/runs."""

    success: bool
    runs: list[RunSummaryOut]


class RunOutput(_Output):
    """GET /api/runs/{id}."""

    success: bool
    run: RunOut


class RunCancelOutput(_Output):
    """POST /api/runs/{id}/cancel."""

    success: bool
    runId: str
    status: RunStatus = Field(description="`cancelled` once stopped; `running` if its process has not stopped it yet.")
    message: str
    run: RunOut


class DeliverableOutput(_Output):
    """GET /api/deliverables/{id}."""

    success: bool
    deliverable: DeliverableOut
