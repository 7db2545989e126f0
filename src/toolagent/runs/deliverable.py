"""The deliverable of a run: structured data, run metadata, and content in json, markdown or text.

A deliverable is bounded in bytes (`max_bytes`, `TOOLAGENT_MAX_DELIVERABLE_BYTES`): over the cap,
each step's result keeps its leading rows and a prefix of long text (`tools/bounds.py`), the
content is rendered from that, and `metadata.truncated` gives the cap and the full size.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import secrets
import time
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..model.bounds import bound_deliverable
from ..model.redaction import redact
from ..model.status import RunStatus, StepStatus

if TYPE_CHECKING:
    from .plan import BuildPlan
    from .steps import StepState

#: Rows shown per table in markdown and text renderings (the data keeps them all).
RENDER_MAX_ROWS = 50
#: Largest image, audio or embedded resource (decoded bytes, or characters of text) copied into a
#: deliverable; a larger one is described (type, size) and points at the step record holding it.
ATTACHMENT_MAX_BYTES = 256 * 1024


def attachments(
    blocks: Sequence[dict[str, Any]], *, run_id: str, position: int, max_bytes: int = ATTACHMENT_MAX_BYTES
) -> list[dict[str, Any]]:
    """The non-text content blocks of a result, as the deliverable keeps them.

    Images and audio keep `mimeType`, `size` (decoded bytes) and `data` up to `max_bytes`; resource
    links keep `uri`, `name`, `mimeType` and `description`; embedded resources keep `uri`,
    `mimeType`, `size` and their `text` or `blob` up to `max_bytes`. Whatever is left out is marked
    `truncated` with `storedIn`: the run and step whose record holds the full result.
    """
    kept: list[dict[str, Any]] = []
    where = {"runId": run_id, "step": position}
    for block in blocks:
        kind = block.get("type")
        if kind in ("image", "audio"):
            data = block.get("data") or ""
            item: dict[str, Any] = {"type": kind, "mimeType": block.get("mimeType"), "size": _decoded_size(data)}
            _keep(item, "data", data, item["size"], max_bytes, where)
        elif kind == "resource_link":
            item = {
                k: block[k] for k in ("type", "uri", "name", "title", "mimeType", "description", "size") if k in block
            }
        elif kind == "resource":
            res = block.get("resource") or {}
            item = {"type": "resource", "uri": res.get("uri"), "mimeType": res.get("mimeType")}
            if isinstance(res.get("text"), str):
                item["size"] = len(res["text"].encode("utf-8"))
                _keep(item, "text", res["text"], len(res["text"]), max_bytes, where)
            elif isinstance(res.get("blob"), str):
                item["size"] = _decoded_size(res["blob"])
                _keep(item, "blob", res["blob"], item["size"], max_bytes, where)
        else:
            continue
        kept.append(item)
    return kept


def _keep(item: dict[str, Any], key: str, value: str, size: int, max_bytes: int, where: dict[str, Any]) -> None:
    if size <= max_bytes:
        item[key] = value
    else:
        item["truncated"] = True
        item["storedIn"] = where


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)


def deliverable_metadata(
    plan: BuildPlan,
    steps: Sequence[StepState],
    *,
    run_id: str,
    status: str,
    started_at: datetime,
    ended_at: datetime,
    duration_ms: float,
) -> dict[str, Any]:
    """The run metadata (toolsExecuted, successfulTools, ...) plus run and agent identity."""
    ran = [s for s in steps if s.status in (StepStatus.SUCCESS, StepStatus.FAILED)]
    return {
        "toolsExecuted": len(ran),
        "successfulTools": sum(1 for s in steps if s.status == StepStatus.SUCCESS),
        "failedTools": sum(1 for s in steps if s.status in (StepStatus.FAILED, StepStatus.DENIED)),
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
    plan: BuildPlan,
    steps: Sequence[StepState],
    *,
    run_id: str,
    status: str,
    started_at: datetime,
    ended_at: datetime,
    duration_ms: float,
    error: str | None,
    max_bytes: int | None = None,
) -> dict[str, Any]:
    """The row stored in `deliverables`: id, format, type, content, data and metadata, bounded to
    `max_bytes` (None: `TOOLAGENT_MAX_DELIVERABLE_BYTES`, else its default)."""
    metadata = deliverable_metadata(
        plan, steps, run_id=run_id, status=status, started_at=started_at, ended_at=ended_at, duration_ms=duration_ms
    )
    results = [
        {
            "tool": s.tool,
            "status": s.status,
            "params": s.params,
            "paramSources": s.param_sources,
            "structuredContent": s.result.structured if s.result else None,
            "text": s.result.text if s.result else None,
            "error": s.error,
            "durationMs": s.duration_ms,
            "attachments": attachments(s.result.content, run_id=run_id, position=s.position) if s.result else [],
        }
        for s in steps
    ]
    # Masked before rendering, so `content` is rendered from the same masked values as `data`.
    data = redact({"agent": plan.agent_ref, "runId": run_id, "status": status, "error": error, "results": results})
    fmt = plan.deliverable_format.value

    def render(data: dict[str, Any], metadata: dict[str, Any]) -> str:
        if fmt == "json":
            # Ends with a newline, as the markdown and text forms do: a file written from it is a text file.
            return json.dumps({"metadata": metadata, **data}, indent=2, default=str) + "\n"
        if fmt == "markdown":
            return _markdown(plan, data, metadata) + _truncated_note(metadata, "_")
        return _text(plan, data, metadata) + _truncated_note(metadata, "")

    row = {
        "id": f"dlv_{int(time.time() * 1000)}_{secrets.token_hex(4)}",
        "format": fmt,
        "type": plan.deliverable_type,
        "content": render(data, metadata),
        "data": data,
        "metadata": metadata,
        "created_at": ended_at,
    }
    return bound_deliverable(row, _max_bytes(max_bytes), render)


def _max_bytes(given: int | None) -> int:
    if given is not None:
        return given
    from ..model.bounds import ResultBounds

    return ResultBounds().max_deliverable_bytes  # the runner passes its runtime's cap


def _truncated_note(metadata: dict[str, Any], emphasis: str) -> str:
    mark = metadata.get("truncated")
    if not mark:
        return ""
    return (
        f"\n{emphasis}Truncated: the full deliverable is {mark['sizeBytes']} bytes, over the {mark['maxBytes']}-byte "
        f"cap; each step keeps its leading rows and a prefix of long text.{emphasis}\n"
    )


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
                f"- `{t.get('name')}`: "
                + ", ".join(f"{c.get('name')} {c.get('type', '')}".strip() for c in t.get("columns", []))
                for t in sc["tables"]
            ]
        if len(out) == before and sc:
            out += ["", "```json", json.dumps(sc, indent=2, default=str)[:4000], "```"]
        elif not sc and r["text"]:
            fence = _fence(r["text"])
            out += ["", fence, r["text"], fence]
        if r.get("attachments"):
            out += ["", *(_attachment_markdown(a) for a in r["attachments"])]
    return "\n".join(out) + "\n"


def _fence(text: str) -> str:
    # Longer than any backtick run in the text, so a tool's own ``` blocks stay inside it.
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _describe_attachment(a: dict[str, Any]) -> str:
    parts = [a.get("mimeType") or "unknown type"]
    if a.get("size") is not None:
        parts.append(f"{a['size']} bytes")
    if a.get("truncated"):
        parts.append(f"not copied: full result in run {a['storedIn']['runId']} step {a['storedIn']['step']}")
    return ", ".join(parts)


def _attachment_markdown(a: dict[str, Any]) -> str:
    kind = a["type"]
    if kind == "resource_link":
        label = a.get("title") or a.get("name") or a.get("uri")
        return f"- resource link [{label}]({a.get('uri')})" + (f" ({a['mimeType']})" if a.get("mimeType") else "")
    if kind == "image" and "data" in a:
        return f"- image ({_describe_attachment(a)}):\n\n  ![image](data:{a.get('mimeType')};base64,{a['data']})"
    if kind == "resource":
        line = f"- resource `{a.get('uri')}` ({_describe_attachment(a)})"
        if "text" in a:
            text: str = a["text"]
            return line + "\n\n  ```\n  " + text[:4000].replace("\n", "\n  ") + "\n  ```"
        return line
    return f"- {kind} ({_describe_attachment(a)})"


def _text(plan: BuildPlan, data: dict[str, Any], md: dict[str, Any]) -> str:
    out = [
        f"{plan.agent_ref} run {data['runId']}: {data['status']} "
        f"({md['successfulTools']}/{len(data['results'])} tools ok, {md['durationMs']:.0f} ms)"
    ]
    if data["error"]:
        out.append(f"error: {data['error']}")
    for r in data["results"]:
        out.append(f"- {r['tool']}: {r['status']}" + (f" ({r['error']})" if r["error"] else ""))
        sc = r["structuredContent"]
        if isinstance(sc, dict) and isinstance(sc.get("summary"), str):
            out.append("  " + sc["summary"].replace("\n", "\n  "))
        elif r["text"]:
            out.append("  " + r["text"][:2000].replace("\n", "\n  "))
        for a in r.get("attachments") or []:
            where = a.get("uri") if a["type"] in ("resource", "resource_link") else None
            out.append(f"  [{a['type']}{' ' + where if where else ''}: {_describe_attachment(a)}]")
    return "\n".join(out) + "\n"


def interrupted_deliverable(
    run: Any,
    steps: Sequence[Any],
    *,
    error: str,
    ended_at: datetime,
    duration_ms: float | None,
    max_bytes: int | None = None,
) -> dict[str, Any]:
    """The deliverable of a run whose process died: what its steps had done, and why it stopped.

    Built from the stored rows when the run is closed as interrupted (the agent's own format is
    not stored with the run, so it is JSON). Finished steps keep their results and attachments.

    Args:
        run: the run row (`id`, `organization_slug`, `agent_slug`, `agent_version`, `execution_mode`,
            `stop_on_error`, `started_at`).
        steps: its step rows, already closed (`failed` / `skipped`).
        error: why it stopped (`interrupted: ...`).
        ended_at: when it was closed.
        duration_ms: from start to close.
        max_bytes: its byte cap (None: `TOOLAGENT_MAX_DELIVERABLE_BYTES`, else its default).
    """
    results = []
    for s in steps:
        result = s.result or {}
        results.append(
            {
                "tool": s.tool,
                "status": s.status,
                "params": s.params,
                "paramSources": s.param_sources,
                "structuredContent": result.get("structuredContent"),
                "text": result.get("text"),
                "error": s.error,
                "durationMs": s.duration_ms,
                "attachments": attachments(result.get("content") or [], run_id=run.id, position=s.position),
            }
        )
    agent_ref = f"{run.organization_slug}/{run.agent_slug}" if run.organization_slug else run.agent_slug
    metadata = {
        "toolsExecuted": sum(
            1 for s in steps if s.status in (StepStatus.SUCCESS, StepStatus.FAILED) and s.result is not None
        ),
        "successfulTools": sum(1 for s in steps if s.status == StepStatus.SUCCESS),
        "failedTools": sum(1 for s in steps if s.status in (StepStatus.FAILED, StepStatus.DENIED)),
        "executionMode": run.execution_mode,
        "stopOnError": run.stop_on_error,
        "toolsUsed": [s.tool for s in steps if s.result is not None],
        "runId": run.id,
        "status": RunStatus.FAILED,
        "interrupted": True,
        "agent": {"organization": run.organization_slug, "slug": run.agent_slug, "version": run.agent_version},
        "startedAt": run.started_at.isoformat() if run.started_at else None,
        "endedAt": ended_at.isoformat(),
        "durationMs": round(duration_ms, 3) if duration_ms is not None else None,
    }
    data = {"agent": agent_ref, "runId": run.id, "status": RunStatus.FAILED, "error": error, "results": results}

    def render(data: dict[str, Any], metadata: dict[str, Any]) -> str:
        return json.dumps({"metadata": metadata, **data}, indent=2, default=str) + "\n"

    row = {
        "id": f"dlv_{int(time.time() * 1000)}_{secrets.token_hex(4)}",
        "format": "json",
        "type": "interrupted-run",
        "content": render(data, metadata),
        "data": data,
        "metadata": metadata,
        "created_at": ended_at,
    }
    return bound_deliverable(row, _max_bytes(max_bytes), render)
