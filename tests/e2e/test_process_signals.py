"""Stopping the processes a deployment runs: `toolagent serve` and `toolagent worker` end on SIGTERM
with exit 0 (a requested stop, as a supervisor or `podman stop` sends it), also when it comes while
they start; `python -m toolagent` is the `toolagent` command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from _support.mcp_harness import free_port

pytestmark = pytest.mark.timeout(180)
TOOLAGENT = Path(sys.executable).parent / "toolagent"


def _env(**extra: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("TOOLAGENT_")}, **extra}


def _wait_for(predicate: object, proc: subprocess.Popen[str], what: str, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"exited {proc.returncode} before {what}"
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"no {what} within {timeout_s:g} s")


def _stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out


def test_python_dash_m_toolagent_is_the_command() -> None:
    proc = subprocess.run([sys.executable, "-m", "toolagent", "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("toolagent ")


def test_serve_shuts_down_on_sigterm_and_exits_0(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [str(TOOLAGENT), "--db", str(tmp_path / "s.db"), "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(),
    )

    def ready() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/ready", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    _wait_for(ready, proc, "/ready")
    code, out = _stop(proc)
    # uvicorn's graceful shutdown ran (the app's shutdown: servers stopped), and then no exit 143.
    assert "Application shutdown complete" in out, out
    assert code == 0, out


def _hanging_server(tmp_path: Path) -> tuple[Path, Path]:
    """A stdio server that starts and never answers `initialize`: a worker's start waits on it."""
    started = tmp_path / "started"
    script = tmp_path / "hang.py"
    script.write_text(f"import pathlib, time\npathlib.Path({str(started)!r}).touch()\ntime.sleep(120)\n")
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"hang": {"command": sys.executable, "args": [str(script)]}}}))
    return config, started


@pytest.mark.postgres
def test_worker_stops_on_sigterm_while_it_starts(tmp_path: Path, pg_url: str) -> None:
    config, started = _hanging_server(tmp_path)
    proc = subprocess.Popen(
        [str(TOOLAGENT), "--db", pg_url, "--servers", str(config), "worker"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(),
    )
    _wait_for(started.exists, proc, "the server's start")
    code, out = _stop(proc)
    assert (code, "worker stopped" in out, "ready on" in out) == (0, True, False), out
