"""A deliverable's content is a text file: whatever its format, and truncated or not, it ends with
one newline, so `deliverables show ... > file` and the CLI print it as a text file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from toolagent.agents import load_definition_text, record_from_definition
from toolagent.agents.loaders import LoadedAgent
from toolagent.model.bounds import ResultBounds
from toolagent.runs import plan_build
from toolagent.testing import in_memory_pool, temp_store, test_runtime
from toolagent.tools.base import CallContext

pytestmark = pytest.mark.anyio


def _server():  # noqa: ANN202 - an MCPServer
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("calc", log_level="WARNING")

    @server.tool(name="rows")
    def rows(n: int) -> dict[str, Any]:
        return {"rows": [{"i": i, "text": "x" * 200} for i in range(n)]}

    return server


def _plan(fmt: str, n: int) -> Any:
    doc = {
        "metadata": {"name": "rows"},
        "configuration": {"tools": ["calc/rows"], "toolParams": {"calc/rows": {"n": n}}},
    }
    text = yaml.safe_dump(doc)
    defn = load_definition_text(text)
    return plan_build(
        LoadedAgent(defn, record_from_definition(defn, text, org="tests"), "rows"), deliverable_format=fmt
    )


@pytest.mark.parametrize("fmt", ["json", "markdown", "text"])
@pytest.mark.parametrize("n", [2, 2000], ids=["whole", "truncated"])
async def test_the_content_ends_with_one_newline(tmp_path: Path, fmt: str, n: int) -> None:
    bounds = ResultBounds(max_deliverable_bytes=64 * 1024)
    async with (
        temp_store(tmp_path) as store,
        test_runtime(store, in_memory_pool({"calc": _server()}), bounds=bounds) as (rt, me),
    ):
        outcome = await rt.runner(CallContext(me)).run(_plan(fmt, n))
        stored = await store.runs.get_deliverable(outcome.run_id)

    assert outcome.ok, outcome.error
    assert bool(stored.metadata.get("truncated")) == (n > 2)
    assert stored.content.endswith("\n") and not stored.content.endswith("\n\n")
