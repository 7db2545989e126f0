"""Direct calls made under an agent: the agent's tool list and `security` block apply, as in BUILD.

`POST /api/tools/execute`, tRPC `tools.executeTool` and `toolagent tools call` take an optional
agent (`org/slug`). The call context then carries the agent's tools (the gate refuses any other
tool) and its security block (the SQL guard checks SQL-taking tools against its denylist and
table allowlist); the execution's metadata and its audit rows name the agent.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..errors import NotFound, UsageError
from .base import CallContext

if TYPE_CHECKING:
    from ..store import Store

#: The metadata key that names the agent of a direct call; callers may not set it themselves.
AGENT_METADATA_KEY = "agent"


def split_agent_ref(ref: str) -> tuple[str, str]:
    """`org/slug` -> (`org`, `slug`).

    Raises:
        UsageError: `ref` is not of the form `org/slug`.
    """
    org, sep, slug = ref.strip().partition("/")
    if not sep or not org or not slug or "/" in slug or any(c.isspace() or c == "\x00" for c in ref.strip()):
        raise UsageError(f"agent '{ref}' must be `org/slug` (e.g. `demo/supabase-agent`)")
    return org, slug


async def under_agent(store: Store, ref: str, ctx: CallContext) -> CallContext:
    """`ctx` for a call made under the agent `ref`: its tool list, its security block, its name.

    Raises:
        UsageError: `ref` is not `org/slug`. NotFound: no such agent. ConfigError: its stored
        definition no longer validates.
    """
    from ..agents.loaders import load_record

    org, slug = split_agent_ref(ref)
    try:
        record = await store.agents.get_agent(org, slug)
    except NotFound as exc:
        raise NotFound(
            f"agent '{org}/{slug}' not found: list the agents with GET /api/agents (`toolagent agents list`)"
        ) from exc
    config = load_record(record).definition.configuration
    return replace(ctx, agent=f"{org}/{slug}", agent_tools=tuple(config.tools), security=config.security)


def check_metadata(metadata: object) -> None:
    """Refuse caller metadata that sets the reserved `agent` key (it would name an agent the call
    was not made under).

    Raises:
        UsageError: it does.
    """
    if isinstance(metadata, dict) and AGENT_METADATA_KEY in metadata:
        raise UsageError(
            f"context.metadata.{AGENT_METADATA_KEY} is reserved: name the agent with `agent` (`org/slug`) instead"
        )


__all__ = ["AGENT_METADATA_KEY", "check_metadata", "split_agent_ref", "under_agent"]
