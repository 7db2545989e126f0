"""BUILD runs: planning, execution over the tool stack, deliverables, and loading the agent to run.

Names load on first use (as in `toolagent.engine`): a module that needs one part of this package
(`runs.flow`, say) does not load the planner, the runner and the agent loaders with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ..agents.loaders import LoadedAgent
    from ..store import Store
    from .flow import FlowCap
    from .plan import BuildPlan, PlannedStep, merge_overrides, plan_build
    from .runner import BuildRunner, RunOutcome, new_run_id
    from .steps import RunEvent, StepState

#: Public name -> submodule.
_EXPORTS = {
    "FlowCap": "flow",
    "BuildPlan": "plan",
    "PlannedStep": "plan",
    "merge_overrides": "plan",
    "plan_build": "plan",
    "BuildRunner": "runner",
    "RunEvent": "steps",
    "RunOutcome": "runner",
    "StepState": "steps",
    "new_run_id": "runner",
}

__getattr__ = lazy_exports(__name__, _EXPORTS, globals())


async def load_agent(ref: str, store: Store | None) -> LoadedAgent:
    """An agent from a YAML/JSON file path or `org/slug` in the store (None: files only)."""
    from pathlib import Path

    from ..agents.loaders import load_path, load_record
    from ..errors import UsageError

    if Path(ref).is_file():
        loaded = load_path(ref)
        if len(loaded) != 1:
            raise UsageError(f"{ref} holds {len(loaded)} agents; seed it and pass ORG/SLUG")
        return loaded[0]
    path = Path(ref).expanduser()
    if path.suffix.lower() in (".yaml", ".yml", ".json") or ref.startswith((".", "/", "~")) or ref.count("/") > 1:
        # It names a file, not a stored agent: say so rather than suggest seeding.
        raise UsageError(f"agent file '{ref}' does not exist (looked for {path.resolve()})")
    org, sep, slug = ref.partition("/")
    if not sep or not org or not slug or "/" in slug:
        raise UsageError(f"'{ref}' is neither an agent file nor ORG/SLUG (e.g. demo/supabase-agent)")
    if store is None:
        raise UsageError(f"'{ref}' is not a file; a store is needed to load ORG/SLUG")
    return load_record(await store.agents.get_agent(org, slug))


__all__ = [
    "BuildPlan",
    "BuildRunner",
    "FlowCap",
    "PlannedStep",
    "RunEvent",
    "RunOutcome",
    "StepState",
    "load_agent",
    "merge_overrides",
    "new_run_id",
    "plan_build",
]
