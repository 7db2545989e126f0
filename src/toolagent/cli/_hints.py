"""Hints the CLI gives before it starts anything, so a first run fails with the fix in hand."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..errors import UsageError


def payload_fields(steps: Any) -> dict[str, list[str]]:
    """Top-level payload fields the steps' parameter templates read, each with the tools reading it.

    Args:
        steps: the planned steps (each with `tool` and parsed `params`).
    """
    fields: dict[str, list[str]] = {}
    for step in steps:
        for ref in sorted(step.params.references()):
            head, _, rest = ref.partition(".")
            if head == "payload" and rest:
                fields.setdefault(rest.split(".", 1)[0].split("[", 1)[0], []).append(step.tool)
    return fields


def check_payload(agent_ref: str, steps: Any, payload: Mapping[str, Any] | None) -> None:
    """Fail before any server starts when the payload lacks a field the agent's templates read.

    Raises:
        UsageError: naming each missing field, the tool that reads it, and a `-p` to pass.
    """
    given = payload or {}
    missing = {name: tools for name, tools in payload_fields(steps).items() if name not in given}
    if not missing:
        return
    example = json.dumps({**given, **{name: "..." for name in missing}})
    reads = "; ".join(f"payload.{name} ({', '.join(dict.fromkeys(tools))})" for name, tools in missing.items())
    raise UsageError(f"agent '{agent_ref}' reads {reads}, which the payload does not set: pass it with -p '{example}'")


__all__ = ["check_payload", "payload_fields"]
