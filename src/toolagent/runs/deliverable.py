"""The deliverable of a run: structured data, run metadata, and content in json, markdown or text."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..engine.redaction import redact

if TYPE_CHECKING:
    from .plan import BuildPlan
    from .runner import StepState

#: Rows shown per table in markdown and text renderings (the data keeps them all).
RENDER_MAX_ROWS = 50


def deliverable_metadata(
    plan: BuildPlan, steps: Sequence[StepState], *, run_id: str, status: str,
    started_at: datetime, ended_at: datetime, duration_ms: float,
) -> dict[str, Any]:
    """The PRD's run metadata (toolsExecuted, successfulTools, ...) plus run and agent identity."""
    ran = [s for s in steps if s.status in ("success", "failed")]
    return {
        "toolsExecuted": len(ran),
        "successfulTools": sum(1 for s in steps if s.status == "success"),
        "failedTools": sum(1 for s in steps if s.status in ("failed", "denied")),
        "executionMode": plan.mode.value,
        "stopOnError": plan.stop_on_error,
        "toolsUsed": [s.tool for s in ran],
        "runId": run_id,
        "status": status,
        "agent": {"organization": plan.organization_slug, "slug": plan.agent_slug, "version": plan.agent_version},
        "startedAt": started_at.isoformat(),
        "endedAt": ended_at.isoformat(),
        "durationMs": round(duration_ms, 3),
    }


def render_deliverable(
    plan: BuildPlan, steps: Sequence[StepState], *, run_id: str, status: str,
    started_at: datetime, ended_at: datetime, duration_ms: float, error: str | None,
) -> dict[str, Any]:
    """The row stored in `deliverables`: id, format, type, content, data and metadata."""
    metadata = deliverable_metadata(plan, steps, run_id=run_id, status=status, started_at=started_at,
                                    ended_at=ended_at, duration_ms=duration_ms)
    results = [
        {
            "tool": s.tool, "status": s.status, "params": s.params, "paramSources": s.param_sources,
            "structuredContent": s.result.structured if s.result else None,
            "text": s.result.text if s.result else None, "error": s.error, "durationMs": s.duration_ms,
        }
        for s in steps
    ]
    # Masked before rendering, so `content` is rendered from the same masked values as `data`.
    data = redact({"agent": plan.agent_ref, "runId": run_id, "status": status, "error": error, "results": results})
    fmt = plan.deliverable_format.value
    if fmt == "json":
        content = json.dumps({"metadata": metadata, **data}, indent=2, default=str)
    elif fmt == "markdown":
        content = _markdown(plan, data, metadata)
    else:
        content = _text(plan, data, metadata)
    return {
        "id": f"dlv_{int(time.time() * 1000)}_{secrets.token_hex(4)}",
        "format": fmt, "type": plan.deliverable_type, "content": content, "data": data, "metadata": metadata,
        "created_at": ended_at,
    }


def _table(columns: list[str], rows: list[Any]) -> list[str]:
    def cell(v: Any) -> str:
        text = v if isinstance(v, str) else json.dumps(v, default=str)
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows[:RENDER_MAX_ROWS]:
        values = [row.get(c) for c in columns] if isinstance(row, dict) else list(row)
        lines.append("| " + " | ".join(cell(v) for v in values) + " |")
    if len(rows) > RENDER_MAX_ROWS:
        lines.append(f"\n… {len(rows) - RENDER_MAX_ROWS} more rows in the stored deliverable")
    return lines


def _rows_of(sc: dict[str, Any]) -> tuple[list[str], list[Any]] | None:
    rows = sc.get("rows")
    if not isinstance(rows, list):
        return None
    columns = sc.get("columns")
    if not isinstance(columns, list):
        first = next((r for r in rows if isinstance(r, dict)), None)
        columns = list(first) if first else []
    return [str(c) for c in columns], rows


def _markdown(plan: BuildPlan, data: dict[str, Any], md: dict[str, Any]) -> str:
    out = [f"# {plan.definition.metadata.displayName or plan.agent_slug}: {data['status']}", ""]
    out.append(
        f"Run `{data['runId']}` of `{plan.agent_ref}` ({md['executionMode']}, stopOnError={str(md['stopOnError']).lower()}): "
        f"{md['successfulTools']} of {len(data['results'])} tools succeeded in {md['durationMs']:.0f} ms."
    )
    if data["error"]:
        out += ["", f"**Error:** {data['error']}"]
    for r in data["results"]:
        out += ["", f"## {r['tool']} — {r['status']}"]
        if r["error"]:
            out += ["", f"> {r['error']}"]
        sc = r["structuredContent"] or {}
        before = len(out)
        if isinstance(sc.get("summary"), str):
            out += ["", sc["summary"]]
        if isinstance(sc.get("sql"), str):
            out += ["", "```sql", sc["sql"], "```"]
        table = _rows_of(sc)
        if table is not None:
            out += ["", *_table(*table)]
        if isinstance(sc.get("tables"), list) and sc["tables"] and isinstance(sc["tables"][0], dict):
            out += [""] + [
                f"- `{t.get('name')}`: " + ", ".join(f"{c.get('name')} {c.get('type', '')}".strip() for c in t.get("columns", []))
                for t in sc["tables"]
            ]
        if len(out) == before and sc:
            out += ["", "```json", json.dumps(sc, indent=2, default=str)[:4000], "```"]
        elif not sc and r["text"]:
            out += ["", "```", r["text"], "```"]
    return "\n".join(out) + "\n"


def _text(plan: BuildPlan, data: dict[str, Any], md: dict[str, Any]) -> str:
    out = [f"{plan.agent_ref} run {data['runId']}: {data['status']} "
           f"({md['successfulTools']}/{len(data['results'])} tools ok, {md['durationMs']:.0f} ms)"]
    if data["error"]:
        out.append(f"error: {data['error']}")
    for r in data["results"]:
        out.append(f"- {r['tool']}: {r['status']}" + (f" ({r['error']})" if r["error"] else ""))
        sc = r["structuredContent"]
        if isinstance(sc, dict) and isinstance(sc.get("summary"), str):
            out.append("  " + sc["summary"].replace("\n", "\n  "))
        elif r["text"]:
            out.append("  " + r["text"][:2000].replace("\n", "\n  "))
    return "\n".join(out) + "\n"
