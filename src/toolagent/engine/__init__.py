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

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ..embedding import Engine
    from ..errors import ExecutionDenied
    from ..model.entry import ToolEntry
    from ..model.limits import LimitStatus
    from ..model.permissions import CATEGORIES, LEVELS, PLANS, RISKS
    from .config import ENGINE_CONFIG_ENV, EngineConfig, PlanConfig, ToolOverride
    from .history import HistoryPage, HistoryQuery
    from .limits import BudgetUsedUp
    from .metrics import CategoryMetrics, DenialCount, MetricsSnapshot, ToolMetrics, UserMetrics
    from .principals import ApiKey, Principal, Unauthenticated
    from .reads import ToolDetails
    from .registry import Registry, ToolListing

#: Public name -> submodule. Names load on first use, so `toolagent.engine.logs` and the other
#: light submodules import without the store and SQLAlchemy; `Engine` (`toolagent.embedding`)
#: is a `Runtime` over a function of the caller's.
_EXPORTS = {
    "ENGINE_CONFIG_ENV": "config",
    "EngineConfig": "config",
    "PlanConfig": "config",
    "ToolOverride": "config",
    "Engine": "..embedding",
    "ToolDetails": "reads",
    "HistoryPage": "history",
    "HistoryQuery": "history",
    "BudgetUsedUp": "limits",
    "LimitStatus": "..model.limits",
    "CategoryMetrics": "metrics",
    "DenialCount": "metrics",
    "MetricsSnapshot": "metrics",
    "ToolMetrics": "metrics",
    "UserMetrics": "metrics",
    "CATEGORIES": "..model.permissions",
    "LEVELS": "..model.permissions",
    "PLANS": "..model.permissions",
    "RISKS": "..model.permissions",
    "ExecutionDenied": "..errors",
    "ApiKey": "principals",
    "Principal": "principals",
    "Unauthenticated": "principals",
    "Registry": "registry",
    "ToolEntry": "..model.entry",
    "ToolListing": "registry",
}

__getattr__ = lazy_exports(__name__, _EXPORTS, globals())


__all__ = [
    "CATEGORIES",
    "ENGINE_CONFIG_ENV",
    "LEVELS",
    "PLANS",
    "RISKS",
    "ApiKey",
    "BudgetUsedUp",
    "CategoryMetrics",
    "DenialCount",
    "Engine",
    "EngineConfig",
    "ExecutionDenied",
    "HistoryPage",
    "HistoryQuery",
    "LimitStatus",
    "MetricsSnapshot",
    "PlanConfig",
    "Principal",
    "Registry",
    "ToolDetails",
    "ToolEntry",
    "ToolListing",
    "ToolMetrics",
    "ToolOverride",
    "Unauthenticated",
    "UserMetrics",
]
