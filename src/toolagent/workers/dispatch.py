"""In this process or queued for the workers: where BUILD runs and async tool calls go, decided once.

An entry point decides when it starts, from what it was told (`--submit`, `serve --submit`), the
settings (`TOOLAGENT_EXECUTION`) and its store (the queue needs PostgreSQL), and keeps the answer:
the API on its `Services`, the CLI for the command it runs. Callers that always run here (a
worker running its jobs, `toolagent.build()`) use `Dispatcher.HERE`.

| `--submit` | `TOOLAGENT_EXECUTION` | store | where |
| --- | --- | --- | --- |
| no | unset or `inprocess` | any | here |
| no | `queue` | PostgreSQL | queued |
| no | `queue` | SQLite | here, with a note saying why |
| yes | any | PostgreSQL | queued |
| yes | any | SQLite | refused (`UsageError`), before anything runs |
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import UsageError

if TYPE_CHECKING:
    from ..engine.principals import ApiKey, Principal
    from ..model.entry import ToolEntry
    from ..model.execution import Execution
    from ..runs.plan import BuildPlan
    from ..runtime import Runtime
    from ..store import Store
    from ..tools.base import CallContext, CallOutcome

#: The setting's value that sends runs and async calls to the workers.
QUEUE = "queue"
#: Why `--submit` is refused on SQLite, and what to change.
SUBMIT_NEEDS_POSTGRES = (
    "--submit needs a PostgreSQL store shared with the workers: set TOOLAGENT_DATABASE_URL (or --db) "
    "to postgresql://USER@HOST/DB; with SQLite, drop --submit to run here"
)
#: Why `TOOLAGENT_EXECUTION=queue` is not followed on SQLite.
QUEUE_NEEDS_POSTGRES = "TOOLAGENT_EXECUTION=queue needs PostgreSQL; running in this process (SQLite store)"


@dataclass(frozen=True)
class Dispatcher:
    """Where this entry point's BUILD runs and async tool calls go (see the module's table)."""

    queued: bool = False
    """True: they are submitted to the workers; False: they run in this process."""
    note: str | None = None
    """Why a queue the settings asked for is not used (told to the operator once), else None."""

    HERE: ClassVar[Dispatcher]
    """Everything runs in this process: for callers that never queue."""

    @classmethod
    def decide(cls, *, submit: bool = False, execution: str | None = None, sqlite: bool) -> Dispatcher:
        """Decide from `--submit` (`submit`), `TOOLAGENT_EXECUTION` (`execution`) and the store.

        Raises:
            UsageError: `submit` on a SQLite store (the workers share the store through PostgreSQL).
        """
        if not submit and execution != QUEUE:
            return cls.HERE
        if sqlite:
            if submit:
                raise UsageError(SUBMIT_NEEDS_POSTGRES)
            return cls(queued=False, note=QUEUE_NEEDS_POSTGRES)
        return cls(queued=True)

    async def submit_build(
        self,
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
        """Store the run `queued` with its job (one transaction) for a worker to run as `principal`.

        Returns:
            The run id.

        Raises:
            UsageError: this dispatcher runs here (a caller asks `queued` first).
        """
        from .submit import submit_run

        self._require_queue()
        return await submit_run(
            store, plan, payload, principal, api_key=api_key, metadata=metadata, user=user, run_id=run_id
        )

    async def submit_call(
        self, runtime: Runtime, entry: ToolEntry, arguments: dict[str, Any], ctx: CallContext
    ) -> Execution | CallOutcome:
        """Queue one async tool call for the workers (see `calls.submit_call`).

        Returns:
            The execution as stored (`queued`), or the outcome of a call answered here: malformed
            (`failed`, nothing recorded) or refused (`denied`, recorded as in process).

        Raises:
            UsageError: this dispatcher runs here, or the call's timeout is out of range.
        """
        from .calls import submit_call

        self._require_queue()
        return await submit_call(runtime, entry, arguments, ctx)

    def _require_queue(self) -> None:
        if not self.queued:
            raise UsageError("this entry point runs BUILD runs and tool calls in its own process, not on the workers")


Dispatcher.HERE = Dispatcher()


__all__ = ["QUEUE", "QUEUE_NEEDS_POSTGRES", "SUBMIT_NEEDS_POSTGRES", "Dispatcher"]
