"""Request bodies of the HTTP API (responses are documented by their route's model or example)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..agents.models import ExecutionMode


class BuildRequest(BaseModel):
    """PRD section 11: the payload plus optional overrides."""

    model_config = ConfigDict(extra="forbid")

    payload: dict[str, Any] = Field(default_factory=dict, description="Read by templates as `payload.*`.")
    tools: list[str] | None = Field(default=None, description="Replaces the agent's tool list.")
    toolParams: dict[str, dict[str, Any]] | None = Field(default=None, description="Merged per tool over the agent's.")
    toolExecutionMode: ExecutionMode | None = Field(default=None, description="sequential or parallel.")
    stopOnError: bool | None = Field(default=None, description="Stop at the first failure.")
    format: str | None = Field(default=None, pattern="^(json|markdown|text)$", description="Deliverable format.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Read by templates as `metadata.*`.")
    async_: bool = Field(default=False, alias="async", description="Answer 202 with the run id at once.")

    def overrides(self) -> dict[str, Any]:
        """The override keys that were given."""
        out: dict[str, Any] = {}
        for key in ("tools", "toolParams", "toolExecutionMode", "stopOnError"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value.value if isinstance(value, ExecutionMode) else value
        return out


class AgentUpsert(BaseModel):
    """PRD section 9 record for PUT (organization and slug come from the path)."""

    model_config = ConfigDict(extra="forbid")

    display_name: str = Field(min_length=1)
    agent_type: str = Field(min_length=1)
    mode_profile: str = Field(min_length=1)
    status: str = Field(min_length=1)
    yaml: str = Field(min_length=1, description="The definition as YAML or a JSON string.")
    description: str | None = None
    context: Any = None
    plan_structure: Any = None
    deliverable_structure: Any = None
    io_schema: Any = None
    config: Any = None
    version: str | None = None
