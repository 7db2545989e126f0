"""The agent configuration contract (the definition document) and the `agents` table's record.

Every model forbids unknown keys, so a typo is an error naming the nearest valid key rather
than a silent fallback to a default.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class ExecutionMode(StrEnum):
    """How the configured tools run."""

    SEQUENTIAL = "sequential"
    PARALLEL = "parallel"


class DeliverableFormat(StrEnum):
    """The rendering of a run's deliverable."""

    JSON = "json"
    MARKDOWN = "markdown"
    TEXT = "text"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=False, use_enum_values=False)


class Metadata(_Strict):
    """Who the agent is."""

    name: str = Field(min_length=1, description="Machine name of the agent, usually its slug.")
    displayName: str | None = Field(default=None, description="Human-readable name.")
    description: str | None = Field(default=None, description="What the agent does.")
    version: str | None = Field(default=None, description="Version of the definition, e.g. 0.1.0.")
    type: str = Field(default="tool", description="Agent type; tool agents use `tool`.")


class Communication(_Strict):
    """Accepted input and produced output media types."""

    input_modes: list[str] = Field(default_factory=list, description="Accepted input media types.")
    output_modes: list[str] = Field(default_factory=list, description="Produced output media types.")


class ExecutionCapabilities(_Strict):
    """Which modes the agent supports; tool agents run BUILD only."""

    supports_converse: bool = Field(default=False, description="Conversational mode.")
    supports_plan: bool = Field(default=False, description="PLAN mode.")
    supports_build: bool = Field(default=True, description="BUILD mode.")


class McpInfo(_Strict):
    """Informational: the runner routes by each tool's namespace, never by this."""

    server: str | None = Field(default=None, description="Main MCP server of the agent (informational).")


class Security(_Strict):
    """SQL restrictions applied to tools that take SQL."""

    denied_operations: list[str] = Field(
        default_factory=lambda: ["DROP", "TRUNCATE", "ALTER", "DELETE", "UPDATE"],
        description="SQL operations refused anywhere in a statement.",
    )
    allowed_tables: list[str] | None = Field(
        default=None, description="When set, the only tables a statement may reference."
    )

    @field_validator("denied_operations")
    @classmethod
    def _upper(cls, ops: list[str]) -> list[str]:
        return [op.strip().upper() for op in ops]

    @field_validator("allowed_tables")
    @classmethod
    def _table_names(cls, tables: list[str] | None) -> list[str] | None:
        # Checked with the SQL guard's own identifier rules, so a name it could not compare
        # fails when the definition loads rather than at the first SQL step.
        from ..sql.names import normalize_table_name

        for name in tables or []:
            try:
                normalize_table_name(name)
            except ValueError as exc:
                raise ValueError(f"invalid table name {name!r} in allowed_tables: {exc}") from exc
        return tables


class Deliverable(_Strict):
    """The deliverable a BUILD run persists."""

    format: DeliverableFormat = Field(default=DeliverableFormat.JSON, description="json, markdown or text.")
    type: str = Field(default="tool-result", description="Deliverable type label.")


class Configuration(_Strict):
    """The authoritative `configuration` block: tools, their params, mode, stopOnError, security, deliverable."""

    prompt_prefix: str | None = Field(default=None, description="Instructions prefixed to prompts.")
    execution_capabilities: ExecutionCapabilities = Field(
        default_factory=ExecutionCapabilities, description="Supported modes."
    )
    mcp: McpInfo | None = Field(default=None, description="Informational MCP server name.")
    tools: list[str] = Field(
        default_factory=list, description="Required. Fully namespaced tools, `namespace/tool`, in run order."
    )
    toolParams: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Per-tool parameters keyed by tool name; strings may hold `{{payload.x}}` or `<<payload.x>>`.",
    )
    toolExecutionMode: ExecutionMode = Field(
        default=ExecutionMode.SEQUENTIAL, description="`sequential` (default) or `parallel`."
    )
    stopOnError: bool = Field(default=True, description="Stop at the first failed tool (default true).")
    security: Security = Field(default_factory=Security, description="SQL denylist and table allowlist.")
    deliverable: Deliverable = Field(default_factory=Deliverable, description="Deliverable format and type.")


class AgentDef(_Strict):
    """A tool agent definition: the document in an agent YAML file or the `yaml` column."""

    metadata: Metadata = Field(description="Name, display name, description, version, type.")
    communication: Communication = Field(default_factory=Communication, description="Input and output modes.")
    configuration: Configuration = Field(description="What the agent runs and how.")
    context: dict[str, Any] | None = Field(default=None, description="Optional free-form context.")


class AgentRecord(BaseModel):
    """A row of the `agents` table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    organization_slug: str = Field(min_length=1, description="Owning organization, e.g. `demo`.")
    slug: str = Field(min_length=1, description="Agent slug, unique within its organization.")
    display_name: str = Field(min_length=1, description="Human-readable name.")
    agent_type: str = Field(min_length=1, description="Agent type, e.g. `tool`.")
    mode_profile: str = Field(min_length=1, description="Mode profile, e.g. `tool_full`.")
    status: str = Field(min_length=1, description="Lifecycle status, e.g. `active`.")
    yaml: str = Field(min_length=1, description="The agent definition as a YAML or JSON string.")
    description: str | None = Field(default=None, description="What the agent does.")
    context: Any = Field(default=None, description="Optional context (text or JSON).")
    plan_structure: Any = Field(default=None, description="Optional plan structure.")
    deliverable_structure: Any = Field(default=None, description="Optional deliverable structure.")
    io_schema: Any = Field(default=None, description="Optional input/output schema.")
    config: Any = Field(default=None, description="Optional extra configuration.")
    version: str | None = Field(default=None, description="Record version.")
    created_at: datetime | None = Field(default=None, description="Set by the store.")
    updated_at: datetime | None = Field(default=None, description="Set by the store.")

    @property
    def ref(self) -> str:
        """`org/slug`."""
        return f"{self.organization_slug}/{self.slug}"


#: Request overrides accepted by a BUILD run.
OVERRIDABLE_KEYS = ("tools", "toolParams", "toolExecutionMode", "stopOnError")


def definition_json_schema() -> dict[str, Any]:
    """The JSON Schema of an agent definition, for editors."""
    schema = AgentDef.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "toolagent agent definition"
    return schema
