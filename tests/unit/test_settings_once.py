"""Settings are read once, by entry points, and passed down: two runtimes with different settings
share a process, each keeping its own; no library module reads the environment."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from toolagent.settings import Settings
from toolagent.testing import temp_store, test_runtime
from toolagent.tools.base import CallContext
from toolagent.tools.function_source import FunctionSource, FunctionTool

pytestmark = pytest.mark.anyio

SRC = Path(__file__).resolve().parents[2] / "src" / "toolagent"
#: Where the environment may be read: the settings themselves and the entry points (the CLI's
#: commands, `create_app`, the `open_runtime` facade when given no settings, the shipped servers'
#: own settings).
ENTRY_POINTS = {
    "settings.py",
    "api/app.py",
    "runtime.py",
    "servers/supabase/__main__.py",
    "servers/supabase/server.py",
    "servers/supabase/settings.py",
}
#: Library modules that still read the environment themselves; each is to take its settings from
#: its caller, and leaves this set when it does (the test fails on any other).
STILL_READING = {
    "engine/audit_key.py",
    "engine/config.py",
    "engine/logs.py",
    "mcp/config.py",
    "store/db.py",
}


def big(size: int) -> str:
    """A result of `size` characters."""
    return "x" * size


async def test_two_runtimes_in_one_process_keep_their_own_settings(tmp_path: Path) -> None:
    small = Settings.from_env(
        {"TOOLAGENT_MAX_RESULT_BYTES": "1024", "TOOLAGENT_FLOW_MAX_ITEMS": "3", "TOOLAGENT_COMMIT_WINDOW_MS": "0"}
    )
    roomy = Settings.from_env({"TOOLAGENT_MAX_RESULT_BYTES": "1048576", "TOOLAGENT_FLOW_MAX_ITEMS": "500"})
    stored: dict[str, Any] = {}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with temp_store(tmp_path / "a") as store_a, temp_store(tmp_path / "b") as store_b:
        source_a = FunctionSource("fn", [FunctionTool.from_function(big, risk="safe")])
        source_b = FunctionSource("fn", [FunctionTool.from_function(big, risk="safe")])
        async with (
            test_runtime(store_a, sources=[source_a], settings=small) as (a, me_a),
            test_runtime(store_b, sources=[source_b], settings=roomy) as (b, me_b),
        ):
            for name, runtime, me in (("small", a, me_a), ("roomy", b, me_b)):
                outcome = await runtime.tools.call("fn/big", {"size": 5000}, CallContext(me))
                assert outcome.record is not None
                stored[name] = await runtime.executions.get(outcome.record.id)
            assert (a.bounds.max_result_bytes, b.bounds.max_result_bytes) == (1024, 1048576)
            assert (a.flow_cap.max_items, b.flow_cap.max_items) == (3, 500)
            assert (a.recorder.writes.window_s, b.recorder.writes.window_s) == (0.0, 0.020)
            assert a.runner(CallContext(me_a)).bounds.max_result_bytes == 1024
    small_result, roomy_result = stored["small"].result, stored["roomy"].result
    assert "x" * 5000 not in repr(small_result.to_json())  # cut to its runtime's cap
    assert "x" * 5000 in repr(roomy_result.to_json())


def test_a_runtime_given_no_settings_reads_no_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import anyio

    from toolagent.runtime import Runtime

    monkeypatch.setenv("TOOLAGENT_MAX_RESULT_BYTES", "2048")

    async def body() -> int:
        async with temp_store(tmp_path) as store:
            return Runtime(store).bounds.max_result_bytes

    assert anyio.run(body) == 1024 * 1024  # the default, not the variable


def test_only_entry_points_read_the_environment() -> None:
    reading = {
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if re.search(r"\bfrom_env\(", path.read_text(encoding="utf-8"))
        and not str(path.relative_to(SRC)).startswith("cli/")
    }
    assert reading - ENTRY_POINTS == STILL_READING
