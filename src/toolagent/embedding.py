"""Embedding toolagent in a Python program: `build()` runs one BUILD as the CLI would, and
`Engine` governs calls whose transport the program owns.

`build()` opens a runtime over the store and the configured servers, runs the agent's plan
through the runtime's tool stack, and closes it; for many builds or calls in one program, open
one runtime (`toolagent.runtime.open_runtime`) and keep it.

`Engine` is the runtime without servers, calling tools through a function of the caller's. Its one job is governing a call whose transport the caller owns: `execute` sends it through the
same tool stack as every other call (gate, limits, record and audit, timeout and cancellation,
retries, schema check), with `invoke` as the innermost source. Embedders and tests use it;
entry points use `toolagent.runtime.open_runtime`.

```python
async with open_store(url) as store, Engine(store, config=EngineConfig.load()) as engine:
    engine.registry.update(specs)
    principal = await engine.principals.resolve_cli_user(None)
    execution = await engine.execute(spec, {"path": "/tmp/x"}, principal, invoke)
```
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .engine.principals import ApiKey, Principal
from .engine.reads import ToolDetails
from .errors import UsageError
from .model.execution import Execution
from .model.spec import ToolResult, ToolSpec
from .model.status import CallStatus
from .runtime import DEFAULT_AUDIT, Runtime
from .settings import Settings
from .tools.base import CallContext, ToolSource
from .tools.cancellation import CANCEL_WAIT_S
from .tools.catalogue import Catalogue
from .tools.function_source import FunctionSource, FunctionTool
from .tools.records import answered
from .tools.stack import ToolStack

if TYPE_CHECKING:
    from .agents.loaders import LoadedAgent
    from .mcp.config import ServersConfig
    from .runs.runner import RunOutcome

Invoke = Callable[[dict[str, Any]], Awaitable[ToolResult]]


def invoke_source(spec: ToolSpec, invoke: Invoke) -> ToolSource:
    """An innermost source whose one tool, `spec`, is performed by `invoke(arguments)` (its errors
    propagate to the outer layers, as a transport's would): a `FunctionSource` under a catalogue."""
    tool = FunctionTool.from_handler(spec.tool, invoke, input_schema=spec.input_schema)
    return Catalogue(FunctionSource(spec.server, [tool], origin=f"the caller's function for '{spec.name}'"))


class Engine(Runtime):
    """The runtime over a store, for calls performed by a caller-given function."""

    async def execute(
        self,
        spec: ToolSpec,
        arguments: dict[str, Any],
        principal: Principal,
        invoke: Invoke,
        *,
        timeout_ms: int | None = None,
        run_id: str | None = None,
        agent_tools: Sequence[str] | None = None,
        api_key: ApiKey | None = None,
        session_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Execution:
        """Gate, record and run one tool call through the tool stack.

        Returns:
            The finished execution: `success`, `failed` (also when the tool reported an error;
            its result is kept) or `cancelled` (timeout, cancel by id, or a cancelled run).

        Raises:
            UsageError: The timeout is out of range, or the engine is not started.
            ExecutionDenied: (FORBIDDEN) the gate refused; recorded, never sent.
            RateLimited, BudgetExceeded: (TOO_MANY_REQUESTS) a limit refused; recorded, never sent.
        """
        if not self.started:
            raise UsageError("the engine is not started: use `async with Engine(...)` or `await engine.start()` first")
        stack = self._stack_for(spec, invoke)
        ctx = CallContext(
            principal,
            api_key=api_key,
            run_id=run_id,
            agent_tools=agent_tools,
            session_id=session_id,
            metadata=metadata,
            timeout_ms=timeout_ms,
        )
        outcome = answered(await stack.call(self.registry.entry_for(spec), arguments, ctx))
        if outcome.exception is not None and (outcome.status is CallStatus.DENIED or outcome.record is None):
            raise outcome.exception  # refused, or malformed (never recorded)
        assert outcome.record is not None
        return outcome.record

    def _stack_for(self, spec: ToolSpec, invoke: Invoke) -> ToolStack:
        """The runtime's stack over `invoke` as `spec` (`Runtime.stack_over`), composed once per
        tool and function: a caller passing the same function again reuses it."""
        stacks: dict[str, tuple[ToolSpec, Invoke, ToolStack]] = self.__dict__.setdefault("_invoke_stacks", {})
        kept = stacks.get(spec.name)
        if kept is not None and kept[0] == spec and kept[1] is invoke:
            return kept[2]
        stack = self.stack_over(invoke_source(spec, invoke))
        stacks[spec.name] = (spec, invoke, stack)
        return stack


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
    settings: Settings | None = None,
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
        settings: what the run's runtime runs with (default: read from the environment, once).

    Raises:
        ConfigError: invalid agent, overrides or server config (before anything runs).
        NotFound: `user` names no stored user.
    """
    from .agents.loaders import LoadedAgent
    from .mcp.config import ServersConfig
    from .runs import load_agent
    from .runs.plan import plan_build
    from .runtime import open_runtime

    config = servers if isinstance(servers, ServersConfig) else ServersConfig.load(servers)
    async with open_runtime(db, config, settings=settings) as runtime:
        caller = principal or await runtime.principal(user)
        loaded = agent if isinstance(agent, LoadedAgent) else await load_agent(agent, runtime.store)
        plan = plan_build(loaded, overrides, deliverable_format=deliverable_format)
        # Only the servers the plan uses are started.
        await runtime.catalogue.refresh(list(dict.fromkeys(t.partition("/")[0] for t in plan.tools)))
        return await runtime.runner(CallContext(caller)).run(plan, payload, metadata=metadata)


__all__ = ["CANCEL_WAIT_S", "DEFAULT_AUDIT", "Engine", "Invoke", "ToolDetails", "build", "invoke_source"]
