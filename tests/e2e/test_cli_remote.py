"""`toolagent --api URL` against a live `serve`: the same output and exit codes as the local
commands over the same store, clear errors for an unreachable server or a refused key, and none
of the local machinery loaded."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from _support.api_harness import LiveServer, User, agent_body, live_server, probe_servers, provision, server, users  # noqa: F401  (fixtures)
from _support.mcp_harness import free_port
from typer.testing import CliRunner

from toolagent.cli import app

pytestmark = pytest.mark.timeout(180)

USERS = [("ann", "admin", "enterprise"), ("bob", "execute_basic", "enterprise")]
ENV = {"COLUMNS": "160", "TOOLAGENT_API_URL": "", "TOOLAGENT_API_KEY": ""}


@pytest.fixture(scope="module")
def users_and_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, User], LiveServer]]:
    work = tmp_path_factory.mktemp("cli_remote")
    db = f"sqlite+aiosqlite:///{work / 'api.db'}"
    made = provision(db, USERS)
    with live_server(work, probe_servers(), db=db) as live:
        definition = {
            "metadata": {"name": "pair", "version": "0.1.0", "type": "tool"},
            "configuration": {"tools": ["probe/echo"], "toolParams": {"probe/echo": {"text": "{{payload.text}}"}}},
        }
        with live.client(made["ann"]) as ann:
            assert ann.put("/api/agents/demo/pair", json=agent_body(definition)).status_code in (200, 201)
        yield made, live


def local(live: LiveServer, *args: str) -> tuple[int, str, str]:
    servers = str(Path(live.log).parent / "mcp.json")
    result = CliRunner().invoke(app, ["--db", live.db, "--servers", servers, "--user", "bob", *args], env=ENV)
    # Starting a server is the local command's own news.
    stderr = "".join(line for line in result.stderr.splitlines(True) if not line.startswith("starting MCP server"))
    return result.exit_code, result.stdout, stderr


def remote(live: LiveServer, user: User | None, *args: str, url: str | None = None) -> tuple[int, str, str]:
    env = {**ENV, "TOOLAGENT_API_KEY": user.key if user else ""}
    result = CliRunner().invoke(app, ["--api", url or live.url, *args], env=env)
    return result.exit_code, result.stdout, result.stderr


def _no_ids(text: str) -> str:
    return re.sub(r"(exec|run|dlv)_\d+_[0-9a-f]+", "ID", re.sub(r"\d+ ms", "N ms", text))


def test_tools_list_and_show_print_the_same(server: LiveServer, users: dict[str, User]) -> None:
    for args in (["tools", "list"], ["--json", "tools", "list"], ["tools", "show", "probe/echo"]):
        assert remote(server, users["bob"], *args) == local(server, *args), args
    code, stdout, _ = remote(server, users["bob"], "--json", "tools", "show", "probe/echo")
    shown = json.loads(stdout)
    assert code == 0 and shown["user"] == {"name": "bob", "level": "execute_basic"}
    assert shown["timeoutSource"] == "engine" and shown["timeoutMs"] == 30000


def test_tools_call_outcomes_and_exit_codes_match(server: LiveServer, users: dict[str, User]) -> None:
    cases = [
        (["tools", "call", "probe/echo", "--args", '{"text": "hi"}'], 0),
        (["tools", "call", "probe/fail"], 1),  # the tool failed
        (["tools", "call", "probe/query", "--args", '{"sql": "select 1"}'], 1),  # denied: dangerous for bob
        (["tools", "call", "probe/echo", "--args", '{"text": 3}'], 2),  # arguments break the schema
        (["tools", "call", "probe/nope"], 1),  # not found
        (["tools", "call", "echo"], 2),  # no namespace
    ]
    for args, expected in cases:
        here, there = local(server, *args), remote(server, users["bob"], *args)
        assert here[0] == there[0] == expected, (args, here, there)
        assert here[1] == there[1], args
        first = [line for line in _no_ids(there[2]).splitlines() if line.startswith("error")]
        assert first == [line for line in _no_ids(here[2]).splitlines() if line.startswith("error")] or expected == 2
    code, _, stderr = remote(server, users["bob"], "tools", "call", "probe/query", "--args", '{"sql": "select 1"}')
    assert "denied:" in stderr and "fix:" in stderr and "recorded as execution exec_" in stderr


def test_build_then_runs_list_and_show(server: LiveServer, users: dict[str, User]) -> None:
    code, stdout, stderr = remote(server, users["bob"], "--json", "build", "demo/pair", "-p", '{"text": "yo"}')
    built = json.loads(stdout)
    assert code == 0 and built["status"] == "success", stderr
    assert set(built) == {"runId", "status", "deliverableId", "deliverable"}
    code, stdout, _ = remote(server, users["bob"], "--json", "runs", "list", "--agent", "demo/pair")
    assert code == 0 and built["runId"] in [r["id"] for r in json.loads(stdout)]
    for args in (["runs", "show", built["runId"]], ["--json", "runs", "show", built["runId"]]):
        assert remote(server, users["bob"], *args)[:2] == local(server, *args)[:2], args
    assert remote(server, users["bob"], "runs", "show", "run_0_missing")[0] == 1
    # the options may come after the command too
    code, stdout, _ = (
        CliRunner()
        .invoke(app, ["runs", "list", "--api", server.url], env={**ENV, "TOOLAGENT_API_KEY": users["bob"].key})
        .exit_code,
        "",
        "",
    )
    assert code == 0


def test_unreachable_server_and_refused_or_missing_key(server: LiveServer, users: dict[str, User]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    code, _, stderr = remote(server, users["bob"], "runs", "list", url=url)
    assert code == 1 and url in stderr and "TOOLAGENT_API_URL" in stderr
    bad = User("bad", "x", "ta_not_a_key", "key_x")
    code, _, stderr = remote(server, bad, "tools", "list")
    assert code == 2 and "refused the key in TOOLAGENT_API_KEY" in stderr
    code, _, stderr = remote(server, None, "tools", "list")
    assert code == 2 and "TOOLAGENT_API_KEY is not set" in stderr
    code, _, stderr = remote(server, users["bob"], "users", "list")
    assert code == 2 and "local store only" in stderr


def loaded_by(args: list[str], cwd: Path, env: dict[str, str], modules: tuple[str, ...]) -> list[object]:
    """`[which of modules were imported, exit code]` of `toolagent ARGS` run as a fresh process."""
    import subprocess
    import sys

    code = (
        "import json, sys\nfrom toolagent.cli import main\nsys.argv = ['toolagent', *sys.argv[1:]]\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\nelse:\n    code = 0\n"
        f"print('LOADED', json.dumps([sorted(m for m in {modules!r} if m in sys.modules), code]), file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60, cwd=cwd, env=env
    )
    last = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
    assert last.startswith("LOADED "), proc.stderr
    return json.loads(last.removeprefix("LOADED "))  # type: ignore[no-any-return]


def test_remote_call_loads_no_runtime_mcp_or_sqlalchemy(
    server: LiveServer, users: dict[str, User], tmp_path: Path
) -> None:
    import os

    env = {**os.environ, "TOOLAGENT_API_URL": server.url, "TOOLAGENT_API_KEY": users["bob"].key}
    heavy = ("mcp", "sqlalchemy", "uvicorn", "fastapi", "toolagent.runtime", "toolagent.store")
    assert loaded_by(["tools", "call", "probe/echo", "-a", '{"text": "x"}'], tmp_path, env, heavy) == [[], 0]
