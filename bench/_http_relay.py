"""The floor under the API's figures: `POST /api/tools/execute` on a bare FastAPI app that forwards
each call to one shared MCP session (bench_server.py over stdio), with no key check, gate, limits,
records or audit. Started by bench/api_load.py in a subprocess of its own:

    python bench/_http_relay.py PORT
"""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI
from mcp import ClientSession, StdioServerParameters, stdio_client

HERE = Path(__file__).resolve().parent
SESSION: dict[str, ClientSession] = {}


@contextlib.asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    params = StdioServerParameters(command=sys.executable, args=[str(HERE / "bench_server.py"), "stdio", "0", "1"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        SESSION["bench"] = session
        # Its start-up objects out of the collector's full passes, as the API server does once
        # ready (toolagent._heap): the comparison is of the work per call, not of the heaps.
        gc.collect()
        gc.freeze()
        yield


app = FastAPI(lifespan=lifespan)


@app.get("/ready")
async def ready() -> dict[str, bool]:
    return {"ready": "bench" in SESSION}


@app.post("/api/tools/execute")
async def execute(body: dict[str, Any]) -> dict[str, Any]:
    result = await SESSION["bench"].call_tool(body["name"].split("/", 1)[1], body.get("arguments") or {})
    return {"success": not result.is_error, "result": result.model_dump(mode="json")}


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
