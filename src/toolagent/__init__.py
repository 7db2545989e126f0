"""toolagent: run tool agents, namespaced MCP tool chains with validation and deliverables."""

from .agents import AgentDef, AgentRecord, LoadedAgent, load_path
from .errors import ToolAgentError
from .runs import BuildRunner, RunOutcome, build, plan_build

__version__ = "0.1.0"

__all__ = [
    "AgentDef",
    "AgentRecord",
    "BuildRunner",
    "LoadedAgent",
    "RunOutcome",
    "ToolAgentError",
    "__version__",
    "build",
    "load_path",
    "plan_build",
]
