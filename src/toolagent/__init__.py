"""toolagent: run tool agents, namespaced MCP tool chains with validation and deliverables.

Public names load on first use, so `python -m toolagent.servers...` and other submodules start
without importing the runner, the store and SQLAlchemy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "AgentDef": "toolagent.agents",
    "AgentRecord": "toolagent.agents",
    "LoadedAgent": "toolagent.agents",
    "load_path": "toolagent.agents",
    "ToolAgentError": "toolagent.errors",
    "BuildRunner": "toolagent.runs",
    "RunOutcome": "toolagent.runs",
    "build": "toolagent.embedding",
    "plan_build": "toolagent.runs",
}

__all__ = ["__version__", *_EXPORTS]

if TYPE_CHECKING:
    from .agents import AgentDef, AgentRecord, LoadedAgent, load_path
    from .embedding import build
    from .errors import ToolAgentError
    from .runs import BuildRunner, RunOutcome, plan_build


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'toolagent' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
