"""Planning a BUILD run: definition + request overrides -> ordered steps. Pure: no I/O."""

from __future__ import annotations

import copy
import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ..agents.loaders import LoadedAgent
from ..agents.models import OVERRIDABLE_KEYS, AgentDef, DeliverableFormat, ExecutionMode, Security
from ..agents.validation import validate_definition
from ..errors import DefinitionInvalid, Problem, UsageError
from ..interpolation import ParamsTemplate


@dataclass(frozen=True)
class PlannedStep:
    """One tool call of the run, with its parameters parsed but not yet rendered."""

    position: int
    tool: str
    params: ParamsTemplate


@dataclass(frozen=True)
class BuildPlan:
    """Everything a run needs to know, fixed before the first call."""

    agent_ref: str
    organization_slug: str
    agent_slug: str
    agent_version: str | None
    definition: AgentDef
    steps: tuple[PlannedStep, ...]
    mode: ExecutionMode
    stop_on_error: bool
    security: Security
    deliverable_format: DeliverableFormat
    deliverable_type: str
    overrides: dict[str, Any]

    @cached_property
    def tools(self) -> tuple[str, ...]:
        """Tool names in run order (made once: every step's call context carries them)."""
        return tuple(s.tool for s in self.steps)


def merge_overrides(definition: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Apply a BUILD request's overrides to a definition document.

    `tools`, `toolExecutionMode` and `stopOnError` replace; `toolParams` merges per tool, the
    request's keys winning over the definition's.

    Raises:
        UsageError: an override key that cannot be overridden (naming the nearest valid one).
    """
    unknown = [k for k in overrides if k not in OVERRIDABLE_KEYS]
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(key, OVERRIDABLE_KEYS, n=1, cutoff=0.5)
        hint = f"did you mean '{close[0]}'?" if close else f"overridable keys: {', '.join(OVERRIDABLE_KEYS)}"
        raise UsageError(f"override key '{key}' is not allowed; {hint}")
    merged = copy.deepcopy(dict(definition))
    cfg = merged.setdefault("configuration", {})
    for key, value in overrides.items():
        if key == "toolParams":
            if not isinstance(value, Mapping):
                raise UsageError("override 'toolParams' must be an object keyed by tool name")
            params = cfg.setdefault("toolParams", {})
            for tool, tool_params in value.items():
                if not isinstance(tool_params, Mapping):
                    raise UsageError(f"override toolParams['{tool}'] must be an object of parameters")
                params[tool] = {**params.get(tool, {}), **tool_params}
        else:
            cfg[key] = copy.deepcopy(value)
    return merged


def plan_build(
    agent: LoadedAgent, overrides: Mapping[str, Any] | None = None, *, deliverable_format: str | None = None
) -> BuildPlan:
    """Merge overrides, re-validate fail-fast, and lay out the steps.

    Raises:
        UsageError: a bad override key or format.
        DefinitionInvalid: the merged definition breaks the contract.
    """
    overrides = dict(overrides or {})
    doc = agent.definition.model_dump(mode="json", by_alias=True, exclude_none=True)
    source = f"{agent.ref} (with request overrides)" if overrides else agent.ref
    if overrides:
        merged = merge_overrides(doc, overrides)
        if "tools" in overrides:
            # The definition's params for tools the request dropped no longer apply; the request's
            # own toolParams keys stay, so a typo in them is still reported.
            cfg = merged["configuration"]
            keep = set(cfg.get("tools") or []) | set(overrides.get("toolParams") or {})
            cfg["toolParams"] = {k: v for k, v in cfg.get("toolParams", {}).items() if k in keep}
        definition = validate_definition(merged, source=source)
    else:
        definition = agent.definition
    cfg = definition.configuration
    if not cfg.execution_capabilities.supports_build:
        raise DefinitionInvalid(
            [Problem("configuration.execution_capabilities.supports_build", "this agent does not support BUILD runs")],
            source=source,
        )
    steps = tuple(
        PlannedStep(
            i, tool, ParamsTemplate.parse(cfg.toolParams.get(tool, {}), where=f"configuration.toolParams.{tool}")
        )
        for i, tool in enumerate(cfg.tools)
    )
    if cfg.toolExecutionMode is ExecutionMode.PARALLEL:
        problems = [
            Problem(
                f"configuration.toolParams.{s.tool}",
                f"parallel steps cannot reference other steps ('{ref}'); "
                "use toolExecutionMode: sequential to chain results",
            )
            for s in steps
            for ref in sorted(s.params.references())
            if ref.split(".", 1)[0] in ("steps", "previous")
        ]
        if problems:
            raise DefinitionInvalid(problems, source=source)
    fmt = cfg.deliverable.format
    if deliverable_format is not None:
        try:
            fmt = DeliverableFormat(deliverable_format)
        except ValueError as exc:
            valid = ", ".join(f.value for f in DeliverableFormat)
            raise UsageError(f"invalid --format '{deliverable_format}': expected one of {valid}") from exc
    rec = agent.record
    return BuildPlan(
        agent_ref=agent.ref,
        organization_slug=rec.organization_slug,
        agent_slug=rec.slug,
        agent_version=rec.version or definition.metadata.version,
        definition=definition,
        steps=steps,
        mode=cfg.toolExecutionMode,
        stop_on_error=cfg.stopOnError,
        security=cfg.security,
        deliverable_format=fmt,
        deliverable_type=cfg.deliverable.type,
        overrides=overrides,
    )
