"""The command loop: one `toolagent tools call` as a fresh process, run locally (cold: the command
opens the store and starts the tool's server itself) and with `--api` to a running `toolagent
serve` (warm: the servers are already up), for the demo's stdio Supabase tool and for a tool of a
`python:` server that runs in process.

Prints the median and fastest wall time of each, after one warm-up run of each (so the file cache
is warm and the store exists).

Run: .venv/bin/python bench/cli_loop.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
TOOLS = {"demo tool (stdio)": "supabase/get-schema", "in-process tool (python:)": "clock/now"}
CLOCK_MODULE = '''
from datetime import datetime, timezone


def now() -> str:
    """The time now, in UTC."""
    return datetime.now(timezone.utc).isoformat()


TOOLS = [now]
'''


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def timed(command: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    proc = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {proc.returncode}: {proc.stderr[-600:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    cli = [sys.executable, "-m", "toolagent.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "clock_tools.py").write_text(CLOCK_MODULE)
        servers = json.loads((REPO / "mcp.json").read_text())
        servers["mcpServers"]["clock"] = {"python": "clock_tools:TOOLS", "risk": "safe"}
        (work / "mcp.json").write_text(json.dumps(servers))
        keep = {k: v for k, v in os.environ.items() if not k.startswith("TOOLAGENT_")}
        env = {
            **keep,
            "TOOLAGENT_DATABASE_URL": f"sqlite+aiosqlite:///{work / 'store.db'}",
            "TOOLAGENT_MCP_CONFIG": str(work / "mcp.json"),
            "PYTHONPATH": os.pathsep.join([str(work), keep.get("PYTHONPATH", "")]),
        }
        subprocess.run(
            [*cli, "users", "add", "bench", "--level", "execute_basic"],
            env=env,
            cwd=work,
            capture_output=True,
            check=True,
        )
        key = subprocess.run(
            [*cli, "keys", "create", "--user", "bench", "--label", "bench"],
            env=env,
            cwd=work,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        port = _free_port()
        serve = subprocess.Popen([*cli, "serve", "--port", str(port), "--log-level", "warning"], env=env, cwd=work)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 120
            while True:
                try:
                    if httpx.get(f"{url}/ready", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline or serve.poll() is not None:
                    raise SystemExit("toolagent serve did not become ready")
                time.sleep(0.2)
            remote_env = {**env, "TOOLAGENT_API_KEY": key}
            print(f"runs: {args.runs} each (fresh processes)")
            for label, tool in TOOLS.items():
                for mode, command, mode_env in (
                    ("cold (local)", [*cli, "tools", "call", tool], env),
                    ("warm (--api)", [*cli, "--api", url, "tools", "call", tool], remote_env),
                ):
                    timed(command, mode_env, work)
                    times = [timed(command, mode_env, work) for _ in range(args.runs)]
                    print(f"{label:28} {mode:13} median {statistics.median(times):.2f} s   fastest {min(times):.2f} s")
        finally:
            serve.terminate()
            serve.wait(timeout=30)


if __name__ == "__main__":
    main()
