"""The tool execution engine: principals, the permission gate, limits, executions, history, metrics.

```python
from toolagent.engine import Engine, EngineConfig

async with Engine(store, config=EngineConfig.load()) as engine:
    engine.registry.update(specs)
    principal = await engine.principals.resolve_cli_user(None)
    execution = await engine.execute(spec, arguments, principal, invoke, timeout_ms=5000)
```

Entry points open a whole runtime instead (`toolagent.runtime.open_runtime`); `Engine` is the
runtime without servers, for calls performed by a function of the caller's.

The audit log, secret redaction, lifecycle events, structured logs and the Prometheus text
rendering live in `audit`, `redaction`, `events`, `logs` and `prometheus`.
"""

from __future__ import annotations

from .config import ENGINE_CONFIG_ENV, EngineConfig, PlanConfig, ToolOverride
from .executions import Execution, Owner
from .history import HistoryPage, HistoryQuery, Stats
from .limits import BudgetUsedUp, LimitStatus
from .metrics import CategoryMetrics, DenialCount, MetricsSnapshot, ToolMetrics, UserMetrics
from .permissions import CATEGORIES, LEVELS, PLANS, RISKS, Decision, ExecutionDenied, decide
from .principals import ApiKey, Principal, Unauthenticated
from .reads import ToolDetails
from .registry import Registry, ToolEntry, ToolListing


def __getattr__(name: str) -> object:
    # `Engine` is a `Runtime`, which is built from this package's modules: imported on first use.
    if name == "Engine":
        from .core import Engine

        return Engine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CATEGORIES", "ENGINE_CONFIG_ENV", "LEVELS", "PLANS", "RISKS", "ApiKey", "BudgetUsedUp", "CategoryMetrics", "Decision",
    "DenialCount", "Engine", "EngineConfig", "Execution", "ExecutionDenied", "HistoryPage", "HistoryQuery", "LimitStatus",
    "MetricsSnapshot", "Owner", "PlanConfig", "Principal", "Registry", "Stats", "ToolDetails", "ToolEntry", "ToolListing",
    "ToolMetrics", "ToolOverride", "Unauthenticated", "UserMetrics", "decide",
]
