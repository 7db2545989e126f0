"""A server process sets the collector once ready (start-up objects frozen, young ones collected
less often); the library never does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolagent._heap import GEN0_THRESHOLD
from toolagent.errors import UsageError
from toolagent.settings import Settings

# Run in a child: the collector's settings are process-wide, and the test process must stay as it is.
CHILD = """
import gc, sys
import httpx, anyio
from toolagent.api.app import create_app
from toolagent.mcp.config import ServersConfig

async def main():
    before = gc.get_threshold()
    app = create_app(db=sys.argv[1], servers=ServersConfig.from_data({"mcpServers": {}}))
    if sys.argv[2] == "serve":
        app.state.freeze_heap = True  # what `toolagent serve` sets
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
            assert (await client.get("/health")).status_code == 200
        print(gc.get_freeze_count(), *before, *gc.get_threshold())

anyio.run(main)
"""


def _serve(tmp_path: Path, mode: str, **env: str) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    db = f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"
    environ = {k: v for k, v in os.environ.items() if k != "TOOLAGENT_GC_THRESHOLD"} | env
    out = subprocess.run(
        [sys.executable, "-c", CHILD, db, mode], capture_output=True, text=True, timeout=120, env=environ
    )
    assert out.returncode == 0, out.stderr
    frozen, *numbers = (int(n) for n in out.stdout.split()[-7:])
    return frozen, tuple(numbers[:3]), tuple(numbers[3:])


@pytest.mark.parametrize(("mode", "serving"), [("serve", True), ("library", False)])
def test_only_a_server_sets_the_collector(tmp_path: Path, mode: str, serving: bool) -> None:
    frozen, before, after = _serve(tmp_path, mode)
    assert (frozen > 10_000) is serving, frozen  # the imports alone leave tens of thousands of objects
    if serving:
        assert after == (GEN0_THRESHOLD, *before[1:])  # the older generations keep their ratios
    else:
        assert after == before


def test_the_young_generations_threshold_is_an_operators_setting(tmp_path: Path) -> None:
    _, before, after = _serve(tmp_path, "serve", TOOLAGENT_GC_THRESHOLD="2500")
    assert after == (2500, *before[1:])


def test_a_threshold_too_small_to_be_meant_is_refused_naming_the_variable() -> None:
    with pytest.raises(UsageError, match="TOOLAGENT_GC_THRESHOLD must be an integer of at least 100"):
        Settings.from_env({"TOOLAGENT_GC_THRESHOLD": "5"})
