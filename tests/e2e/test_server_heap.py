"""A server process freezes its start-up objects once ready; the library never does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# Run in a child: freezing is process-wide, and the test process must stay as it is.
CHILD = """
import gc, sys
import httpx, anyio
from toolagent.api.app import create_app
from toolagent.mcp.config import ServersConfig

async def main():
    app = create_app(db=sys.argv[1], servers=ServersConfig.from_data({"mcpServers": {}}))
    if sys.argv[2] == "serve":
        app.state.freeze_heap = True  # what `toolagent serve` sets
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
            assert (await client.get("/health")).status_code == 200
        print(gc.get_freeze_count())

anyio.run(main)
"""


@pytest.mark.parametrize(("mode", "frozen"), [("serve", True), ("library", False)])
def test_only_a_server_freezes_its_start_up_objects(tmp_path: Path, mode: str, frozen: bool) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"
    out = subprocess.run([sys.executable, "-c", CHILD, db, mode], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    count = int(out.stdout.split()[-1])
    assert (count > 10_000) is frozen, count  # the imports alone leave tens of thousands of objects
