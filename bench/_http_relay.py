"""The floor under the API's figures: `POST /api/tools/execute` on a bare FastAPI app that forwards
each call to one shared MCP session (bench_server.py over stdio), with no key check, gate, limits,
records or audit. Started by bench/api_load.py in a subprocess of its own:

    python bench/_http_relay.py PORT
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI
from mcp import ClientSession, StdioServerParameters, stdio_client

from toolagent._heap import tune_collector

HERE = Path(__file__).resolve().parent
SESSION: dict[str, ClientSession] = {}


@contextlib.asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    params = StdioServerParameters(command=sys.executable, args=[str(HERE / "bench_server.py"), "stdio", "0", "1"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        SESSION["bench"] = session
        # The collector set as the API server sets it once ready (toolagent._heap: start-up
        # objects frozen, young ones collected less often): the comparison is of the work per
        # call, not of the collectors' settings.
        tune_collector()
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
