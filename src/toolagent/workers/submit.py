"""Submitting a BUILD run to the workers, and following it from another process."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import anyio

from ..agents.loaders import LoadedAgent
from ..agents.validation import validate_definition
from ..engine.principals import ApiKey, Principal
from ..model.status import RunStatus, StepStatus
from ..runs.plan import BuildPlan, plan_build
from ..runs.runner import new_run_id
from ..runs.steps import EventSink, RunEvent, StepState
from ..store import RunRow, Store

#: How often `follow_run` reads the run while it waits.
FOLLOW_POLL_S = 0.05


def plan_to_json(plan: BuildPlan) -> dict[str, Any]:
    """The stored form of a plan: the definition as planned (overrides merged), so a worker runs
    exactly what was submitted even if the agent changes meanwhile."""
    return {
        "agent": plan.agent_ref,
        "organization": plan.organization_slug,
        "slug": plan.agent_slug,
        "version": plan.agent_version,
        "overrides": plan.overrides,
        "format": plan.deliverable_format.value,
        "definition": plan.definition.model_dump(mode="json", by_alias=True, exclude_none=True),
    }


@dataclass(frozen=True)
class _Record:
    """What planning reads of an agent's record."""

    organization_slug: str
    slug: str
    version: str | None

    @property
    def ref(self) -> str:
        return f"{self.organization_slug}/{self.slug}"


def plan_from_json(doc: Mapping[str, Any]) -> BuildPlan:
    """The plan `plan_to_json` stored (validated again: templates are parsed, not stored).

    Raises:
        DefinitionInvalid: the stored definition no longer validates.
    """
    definition = validate_definition(dict(doc["definition"]), source=f"{doc['agent']} (submitted)")
    record = _Record(doc["organization"], doc["slug"], doc.get("version"))
    agent = LoadedAgent(definition, record, doc["agent"])  # type: ignore[arg-type]  # _Record has the fields planning reads
    plan = plan_build(agent, None, deliverable_format=doc.get("format"))
    return replace(plan, overrides=dict(doc.get("overrides") or {}))


async def submit_run(
    store: Store,
    plan: BuildPlan,
    payload: Mapping[str, Any] | None,
    principal: Principal,
    *,
    api_key: ApiKey | None = None,
    metadata: Mapping[str, Any] | None = None,
    user: str | None = None,
    run_id: str | None = None,
) -> str:
    """Store the run `queued` and defer its job in one transaction; a worker runs it as `principal`
    (with `api_key`, re-checked at every step).

    Returns:
        The run id.

    Raises:
        UsageError: the store is not PostgreSQL.
    """
    run_id = run_id or new_run_id()
    await store.queue.submit_run(
        id=run_id,
        organization_slug=plan.organization_slug,
        agent_slug=plan.agent_slug,
        agent_version=plan.agent_version,
        user_id=user if user is not None else principal.name,
        execution_mode=plan.mode.value,
        stop_on_error=plan.stop_on_error,
        payload=dict(payload or {}),
        overrides=plan.overrides or None,
        plan=plan_to_json(plan),
        principal=principal.name,
        api_key_id=api_key.id if api_key is not None else None,
        run_metadata=dict(metadata or {}) or None,
        steps=[{"position": s.position, "tool": s.tool} for s in plan.steps],
        # The run's row keeps the redacted form; what the worker runs with is kept aside until the run ends.
        inputs={"plan": plan_to_json(plan), "payload": dict(payload or {}), "metadata": dict(metadata or {}) or None},
    )
    return run_id


async def follow_run(store: Store, run_id: str, on_event: EventSink | None = None) -> RunRow:
    """Wait for a submitted run to end, telling `on_event` what a local run would (`run_started`,
    each step's start and end, `run_finished`); returns the final run."""
    seen: dict[int, str] = {}
    started = False

    async def emit(event: RunEvent) -> None:
        if on_event is not None:
            result = on_event(event)
            if result is not None:
                await result

    while True:
        row = await store.runs.get_run(run_id)
        if row.status != RunStatus.QUEUED and not started:
            started = True
            await emit(RunEvent("run_started", run_id))
        if started:
            for step in await store.runs.get_steps(run_id):
                state = StepState(
                    step.position,
                    step.tool,
                    step.status,
                    step.params,
                    step.param_sources,
                    None,
                    step.error,
                    step.started_at,
                    step.ended_at,
                    step.duration_ms,
                )
                before = seen.get(step.position, StepStatus.PENDING)
                if step.status == before or step.status == StepStatus.PENDING:
                    continue
                if before == StepStatus.PENDING and step.status != StepStatus.SKIPPED and step.started_at is not None:
                    await emit(RunEvent("step_started", run_id, state))
                if step.status != StepStatus.RUNNING:
                    await emit(RunEvent("step_finished", run_id, state))
                seen[step.position] = step.status
        if row.status not in (RunStatus.QUEUED, RunStatus.RUNNING):
            await emit(
                RunEvent("run_finished", run_id, status=row.status, error=row.error, deliverable_id=row.deliverable_id)
            )
            return row
        await anyio.sleep(FOLLOW_POLL_S)


__all__ = ["FOLLOW_POLL_S", "follow_run", "plan_from_json", "plan_to_json", "submit_run"]
