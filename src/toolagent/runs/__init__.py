"""BUILD runs: planning, execution over MCP, deliverables, and the embedding entry point.

Names load on first use (as in `toolagent.engine`): a module that needs one part of this package
(`runs.flow`, say) does not load the planner, the runner and the agent loaders with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ..agents.loaders import LoadedAgent
    from ..engine.principals import Principal
    from ..mcp.config import ServersConfig
    from ..store import Store
    from .flow import FlowCap
    from .plan import BuildPlan, PlannedStep, merge_overrides, plan_build
    from .runner import BuildRunner, RunEvent, RunOutcome, StepState, new_run_id

#: Public name -> submodule.
_EXPORTS = {
    "FlowCap": "flow",
    "BuildPlan": "plan",
    "PlannedStep": "plan",
    "merge_overrides": "plan",
    "plan_build": "plan",
    "BuildRunner": "runner",
    "RunEvent": "runner",
    "RunOutcome": "runner",
    "StepState": "runner",
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


async def build(
    agent: str | LoadedAgent,
    payload: Mapping[str, Any] | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    db: str | None = None,
    servers: str | ServersConfig | None = None,
    user: str | None = None,
    principal: Principal | None = None,
    deliverable_format: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> RunOutcome:
    """Run one BUILD and return its persisted outcome; for embedding toolagent in Python.

    Every step goes through the same tool stack as a CLI build: gated by the caller's level
    against each tool's risk and the agent's tool list, counted against its limits, recorded in
    history and audit, bounded by its timeout and cancellable by id.

    Args:
        agent: `org/slug` in the store, a definition file path, or a loaded agent.
        payload: the request payload templates read as `payload.*`.
        overrides: `tools`, `toolParams`, `toolExecutionMode`, `stopOnError`.
        db: store URL (default: `TOOLAGENT_DATABASE_URL` or the embedded SQLite file).
        servers: path of an `mcpServers` file, a loaded config, or None for the default lookup.
        user: the stored user the run acts as (default: the local user, as on the CLI).
        principal: the caller, already resolved (wins over `user`).
        deliverable_format: `json`, `markdown` or `text` instead of the agent's own.
        metadata: extra request metadata templates read as `metadata.*`.

    Raises:
        ConfigError: invalid agent, overrides or server config (before anything runs).
        NotFound: `user` names no stored user.
    """
    from ..agents.loaders import LoadedAgent
    from ..mcp.config import ServersConfig
    from ..runtime import open_runtime
    from ..tools.base import CallContext
    from .flow import FlowCap
    from .plan import plan_build

    config = servers if isinstance(servers, ServersConfig) else ServersConfig.load(servers)
    async with open_runtime(db, config, flow_cap=FlowCap.from_env()) as runtime:
        caller = principal or await runtime.principal(user)
        loaded = agent if isinstance(agent, LoadedAgent) else await load_agent(agent, runtime.store)
        plan = plan_build(loaded, overrides, deliverable_format=deliverable_format)
        # Only the servers the plan uses are started.
        await runtime.catalogue.refresh(list(dict.fromkeys(t.partition("/")[0] for t in plan.tools)))
        return await runtime.runner(CallContext(caller)).run(plan, payload, metadata=metadata)


__all__ = [
    "BuildPlan",
    "BuildRunner",
    "FlowCap",
    "PlannedStep",
    "RunEvent",
    "RunOutcome",
    "StepState",
    "build",
    "load_agent",
    "merge_overrides",
    "new_run_id",
    "plan_build",
]
