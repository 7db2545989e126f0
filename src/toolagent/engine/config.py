"""The engine's configuration: plans, rate limits, budgets, timeouts, retention, tool overrides.

The defaults are below; a YAML or JSON file named by `TOOLAGENT_ENGINE_CONFIG` overrides any
part of them. Plans given in the file are merged key by key over the defaults, so
`plans: {free: {monthly_budget: 50}}` changes one figure and keeps the rest.

```yaml
plans:
  free:       {level: execute_basic, rate_per_minute: 100, monthly_budget: 100}
  enterprise: {level: execute_advanced, rate_per_minute: 1000, monthly_budget: null}   # null: unlimited
category_rate_per_minute: {shell: 10}        # per user, on top of the plan's rate
tool_rate_per_minute: {"web/post": 5}
default_timeout_ms: 30000
retention_days: 90
local_user_level: execute_basic
local_user_plan: enterprise
tools:
  "shell/*": {enabled: false}                 # exact names first, then fnmatch patterns in file order
  "fs/read_file": {tags: [files, read], version: "2.0.0"}
```
"""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path
from typing import Any, cast

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..agents.yaml_loader import safe_load
from ..errors import ConfigError
from ..model.execution import MAX_TIMEOUT_MS, MIN_TIMEOUT_MS
from ..model.permissions import Category, Level, Plan, Risk
from ..settings import Settings

#: Environment variable naming the engine config file (YAML or JSON).
ENGINE_CONFIG_ENV = "TOOLAGENT_ENGINE_CONFIG"
#: Timeout when neither the call nor the tool's server config sets one.
DEFAULT_TIMEOUT_MS = 30_000
#: Calls per minute per user when a plan does not say.
DEFAULT_RATE_PER_MINUTE = 100
#: Days finished executions are kept by `prune`.
DEFAULT_RETENTION_DAYS = 90
#: How often the engine looks for cancellations requested by other processes.
DEFAULT_CANCEL_POLL_MS = 150


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PlanConfig(_Model):
    """What a subscription plan grants."""

    level: Level = Field(description="Permission level given to new users of this plan.")
    rate_per_minute: int | None = Field(
        default=DEFAULT_RATE_PER_MINUTE,
        ge=1,
        description="Tool calls per user per minute; null for no limit.",
    )
    monthly_budget: int | None = Field(
        default=None, ge=0, description="Tool calls per user per calendar month (UTC); null for unlimited."
    )


def default_plans() -> dict[Plan, PlanConfig]:
    """The issue's plans: budgets 100 / 1,000 / 10,000 / unlimited, 100 calls per minute each."""
    return {
        "free": PlanConfig(level="execute_basic", monthly_budget=100),
        "starter": PlanConfig(level="execute_basic", monthly_budget=1_000),
        "team": PlanConfig(level="execute_advanced", monthly_budget=10_000),
        "enterprise": PlanConfig(level="execute_advanced", monthly_budget=None),
    }


class ToolOverride(_Model):
    """Operator settings for one tool (or every tool matching a pattern)."""

    enabled: bool | None = Field(default=None, description="False hides the tool and denies every call to it.")
    deprecated: bool | None = Field(
        default=None, description="Deprecated tools are left out of listings unless asked for."
    )
    tags: list[str] | None = Field(default=None, description="Tags for discovery filters.")
    version: str | None = Field(default=None, description="Version shown in listings.")
    risk: Risk | None = Field(default=None, description="Risk, overriding every other source.")
    category: Category | None = Field(default=None, description="Category, overriding every other source.")


class EngineConfig(_Model):
    """Everything the execution engine is configured with."""

    plans: dict[Plan, PlanConfig] = Field(default_factory=default_plans, description="Level and limits per plan.")
    category_rate_per_minute: dict[Category, int] = Field(
        default_factory=dict,
        description="Calls per user per minute to tools of a category (on top of the plan's rate).",
    )
    tool_rate_per_minute: dict[str, int] = Field(
        default_factory=dict,
        description="Calls per user per minute to one tool, by qualified name.",
    )
    default_timeout_ms: int = Field(
        default=DEFAULT_TIMEOUT_MS,
        ge=MIN_TIMEOUT_MS,
        le=MAX_TIMEOUT_MS,
        description="Timeout when neither the call nor the server config gives one.",
    )
    retention_days: int = Field(
        default=DEFAULT_RETENTION_DAYS, ge=1, description="Days finished executions are kept by `prune`."
    )
    local_user_level: Level = Field(
        default="execute_basic", description="Level of the CLI's local user when it is created."
    )
    local_user_plan: Plan = Field(
        default="enterprise",
        description="Plan of the CLI's local user (enterprise: no monthly budget for the operator).",
    )
    tools: dict[str, ToolOverride] = Field(
        default_factory=dict,
        description="Per-tool settings by qualified name or fnmatch pattern (`shell/*`).",
    )
    cancel_poll_ms: int = Field(
        default=DEFAULT_CANCEL_POLL_MS,
        ge=20,
        le=2_000,
        description="How often running executions are checked for cancellations requested by other processes.",
    )

    @model_validator(mode="before")
    @classmethod
    def _merge_plans(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("plans"), dict):
            merged: dict[str, Any] = {k: v.model_dump() for k, v in default_plans().items()}
            for name, value in data["plans"].items():
                base = merged.get(name, {})
                merged[name] = {**base, **value} if isinstance(value, dict) else value
            data = {**data, "plans": merged}
        return data

    @model_validator(mode="after")
    def _check_rates(self) -> EngineConfig:
        for where, rates in (
            ("category_rate_per_minute", self.category_rate_per_minute),
            ("tool_rate_per_minute", self.tool_rate_per_minute),
        ):
            for key, value in rates.items():
                if value < 1:
                    raise ValueError(f"{where}.{key} must be at least 1 (remove the entry for no limit)")
        return self

    def plan(self, name: str) -> PlanConfig:
        """One plan's settings (an unknown plan gets the free plan's, the most restrictive)."""
        # An unknown name is a miss like any other key: the cast only lets a str look it up.
        return self.plans.get(cast(Plan, name)) or self.plans.get("free") or default_plans()["free"]

    def tool_override(self, name: str) -> ToolOverride | None:
        """The override for `name`: its exact entry, else the first pattern that matches."""
        exact = self.tools.get(name)
        if exact is not None:
            return exact
        for pattern, value in self.tools.items():
            if any(c in pattern for c in "*?[") and fnmatch.fnmatchcase(name, pattern):
                return value
        return None

    @classmethod
    def load(cls, path: str | Path | None = None) -> EngineConfig:
        """The config from `path`, else from `TOOLAGENT_ENGINE_CONFIG`, else the defaults.

        Raises:
            ConfigError: the file cannot be read or is invalid (the message names the field).
        """
        where = str(path) if path is not None else Settings.from_env().engine_config
        if not where:
            return cls()
        try:
            text = Path(where).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read the engine config: {exc.strerror}", source=where) from exc
        try:
            data = json.loads(text) if where.endswith(".json") else safe_load(text)
        except (json.JSONDecodeError, yaml.YAMLError) as exc:
            raise ConfigError(
                f"not valid {'JSON' if where.endswith('.json') else 'YAML'}: {exc}", source=where
            ) from exc
        return cls.from_data(data or {}, source=where)

    @classmethod
    def from_data(cls, data: Any, *, source: str = "engine config") -> EngineConfig:
        """Validate parsed data.

        Raises:
            ConfigError: invalid data; the message names the first bad field and what to change.
        """
        if not isinstance(data, dict):
            raise ConfigError("the engine config must be a mapping", source=source)
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            path = ".".join(str(p) for p in first["loc"])
            raise ConfigError(first["msg"], source=source, path=path or None) from exc


__all__ = [
    "DEFAULT_CANCEL_POLL_MS",
    "DEFAULT_RATE_PER_MINUTE",
    "DEFAULT_RETENTION_DAYS",
    "DEFAULT_TIMEOUT_MS",
    "ENGINE_CONFIG_ENV",
    "EngineConfig",
    "PlanConfig",
    "ToolOverride",
    "default_plans",
]
