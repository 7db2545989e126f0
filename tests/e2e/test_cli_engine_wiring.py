"""The CLI's tool-calling commands through the execution engine, over the real stdio probe server:
BUILD steps gated by level against risk, `tools call` (timeout, denial, rate limit, history),
`tools list` / `tools show` from the registry, `runs cancel` from another process, and the demo."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from _support.mcp_harness import free_port, probe_config, read_log
from _support.repo import REPO_ROOT
from typer.testing import CliRunner

from toolagent.cli import app

runner = CliRunner()
pytestmark = pytest.mark.timeout(120)
TOOLAGENT = Path(sys.executable).parent / "toolagent"

#: Risk the server config gives each probe tool; the others are unclassified, hence dangerous.
RISKS = {"echo": "safe", "sleep": "safe", "pid": "safe", "add": "moderate", "make-number": "dangerous"}
CATEGORIES = {"echo": "memory", "sleep": "system", "query": "database"}
#: One user per level.
USERS = {"viewer": "view_only", "basic": "execute_basic", "advanced": "execute_advanced", "root": "admin"}
ENGINE_CONFIG = {
    "plans": {"starter": {"rate_per_minute": 1}},
    "tools": {
        "probe/echo": {"tags": ["text", "demo"], "version": "1.2.0"},
        "probe/pid": {"tags": ["demo"], "deprecated": True},
    },
}


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    log = tmp_path / "probe.log"
    servers = tmp_path / "mcp.json"
    servers.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "probe": probe_config(log, risk=RISKS, category=CATEGORIES),
                    "broken": {"command": str(tmp_path / "no-such-server")},
                }
            }
        )
    )
    engine_config = tmp_path / "engine.yaml"
    engine_config.write_text(yaml.safe_dump(ENGINE_CONFIG))
    monkeypatch.setenv("TOOLAGENT_ENGINE_CONFIG", str(engine_config))
    monkeypatch.delenv("TOOLAGENT_USER", raising=False)
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        yaml.safe_dump(
            {
                "metadata": {"name": "matrix"},
                "configuration": {
                    "tools": ["probe/echo", "probe/add", "probe/make-number"],
                    "stopOnError": False,
                    "toolParams": {
                        "probe/echo": {"text": "hi"},
                        "probe/add": {"a": 1, "b": 2},
                        "probe/make-number": {"value": 7},
                    },
                },
            }
        )
    )
    sleeper = tmp_path / "sleeper.yaml"
    sleeper.write_text(
        yaml.safe_dump(
            {
                "metadata": {"name": "sleeper"},
                "configuration": {
                    "tools": ["probe/sleep", "probe/echo"],
                    "toolParams": {"probe/sleep": {"seconds": 60, "tag": "long"}, "probe/echo": {"text": "after"}},
                },
            }
        )
    )
    e = {
        "db": f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}",
        "servers": str(servers),
        "matrix": str(matrix),
        "sleeper": str(sleeper),
        "log": str(log),
        "engine_config": str(engine_config),
    }
    for name, level in USERS.items():
        assert invoke(e, "users", "add", name, "--level", level, "--plan", "enterprise")[0] == 0
    assert invoke(e, "users", "add", "limited", "--level", "execute_basic", "--plan", "starter")[0] == 0
    return e


def invoke(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--db", env["db"], "--servers", env["servers"], *args])
    return result.exit_code, result.stdout, result.stderr


# -- BUILD steps: level x risk --------------------------------------------------------------------

ALLOWED = {
    "view_only": set(),
    "execute_basic": {"safe"},
    "execute_advanced": {"safe", "moderate"},
    "admin": {"safe", "moderate", "dangerous"},
}
REQUIRES = {
    "safe": "execute_basic, execute_advanced or admin",
    "moderate": "execute_advanced or admin",
    "dangerous": "admin",
}


@pytest.mark.parametrize("user", list(USERS))
def test_build_steps_are_gated_by_level_and_risk(env: dict[str, str], user: str) -> None:
    level = USERS[user]
    code, stdout, stderr = invoke(env, "--user", user, "--json", "build", env["matrix"])
    steps = json.loads(stdout)["deliverable"]["data"]["results"]
    expected = {}
    for step in steps:
        risk = RISKS[step["tool"].partition("/")[2]]
        if risk in ALLOWED[level]:
            expected[step["tool"]] = ("success", None)
        else:
            why = "view_only may only view executions; " if level == "view_only" else ""
            expected[step["tool"]] = (
                "denied",
                f"user '{user}' ({level}) may not run '{step['tool']}' (risk {risk}): {why}requires {REQUIRES[risk]}",
            )
    assert {s["tool"]: (s["status"], s["error"]) for s in steps} == expected
    assert code == (0 if level == "admin" else 1), stderr
    # Every step is in the user's history, the denied ones as denials that never reached the server.
    code, stdout, _ = invoke(env, "--user", user, "--json", "history")
    rows = json.loads(stdout)["executions"]
    assert sorted((r["toolName"], r["status"], r["denied"], r["userId"]) for r in rows) == sorted(
        (tool, "success" if status == "success" else "failed", status == "denied", user)
        for tool, (status, _) in expected.items()
    )
    called = [e["tool"] for e in read_log(Path(env["log"])) if e["event"] == "call"]
    assert sorted(called) == sorted(t.partition("/")[2] for t, (s, _) in expected.items() if s == "success")


# -- tools call --------------------------------------------------------------------------------------


def test_tools_call_timeout_denial_rate_limit_and_history(env: dict[str, str]) -> None:
    t0 = time.monotonic()
    code, stdout, stderr = invoke(
        env,
        "--user",
        "basic",
        "tools",
        "call",
        "probe/sleep",
        "--args",
        '{"seconds": 60, "tag": "slow"}',
        "--timeout",
        "1000",
    )
    assert code == 1 and stdout == ""
    assert "error: cancelled: timeout after 1000 ms" in stderr
    assert time.monotonic() - t0 < 30
    started = re.search(
        r"execution (exec_\w+) started \(timeout 1000 ms\); stop it with: toolagent executions cancel \1", stderr
    )
    assert started, stderr
    timed_out = started.group(1)

    code, _, stderr = invoke(env, "--user", "basic", "tools", "call", "probe/make-number", "--args", '{"value": 1}')
    assert code == 1
    assert (
        "error: denied: user 'basic' (execute_basic) may not run 'probe/make-number' (risk dangerous): requires admin"
    ) in stderr
    assert "`toolagent users set-level basic admin`" in stderr
    code, stdout, _ = invoke(
        env, "--user", "basic", "--json", "tools", "call", "probe/add", "--args", '{"a": 1, "b": 2}'
    )
    denied = json.loads(stdout)
    assert code == 1
    assert (denied["status"], denied["denied"], denied["denial"], denied["risk"], denied["level"]) == (
        "failed",
        True,
        "level",
        "moderate",
        "execute_basic",
    )

    # The plan's limit of 1 call per minute: a second call in the same minute is refused with the
    # figures. Windows are clock minutes, so of three calls made within seconds two share one.
    outcomes = []
    for text in "abc":
        code, _, stderr = invoke(
            env, "--user", "limited", "tools", "call", "probe/echo", "--args", json.dumps({"text": text})
        )
        outcomes.append(code)
        if code != 0:
            break
    assert outcomes[-1] == 1 and outcomes[:-1] in ([0], [0, 0]), stderr
    assert "error: rate limited: user 'limited' exceeded the rate limit of 1 calls per minute" in stderr
    assert re.search(r"limit 1, remaining 0, retry after \d+ s", stderr), stderr

    code, stdout, _ = invoke(env, "--user", "basic", "--json", "history")
    rows = {r["toolName"]: r for r in json.loads(stdout)["executions"]}
    assert set(rows) == {"probe/sleep", "probe/make-number", "probe/add"}
    assert (rows["probe/sleep"]["id"], rows["probe/sleep"]["status"], rows["probe/sleep"]["reason"]) == (
        timed_out,
        "cancelled",
        "timeout after 1000 ms",
    )
    assert rows["probe/make-number"]["denial"] == rows["probe/add"]["denial"] == "level"
    code, stdout, _ = invoke(env, "--user", "basic", "executions", "show", timed_out)
    assert code == 0 and "probe/sleep (system, risk safe): cancelled" in stdout
    assert [e["tag"] for e in read_log(Path(env["log"])) if e["event"] == "cancelled"] == ["slow"]  # the server stopped


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--timeout", "999"], "--timeout must be between 1000 and 300000 ms, got 999"),
        (["--timeout", "300001"], "--timeout must be between 1000 and 300000 ms, got 300001"),
        (["--args", "[1]"], "--args must be a JSON object"),
    ],
)
def test_tools_call_usage_errors_exit_two(env: dict[str, str], args: list[str], message: str) -> None:
    code, _, stderr = invoke(env, "tools", "call", "probe/echo", *args)
    assert code == 2 and message in stderr


# -- tools list / show -------------------------------------------------------------------------------


def test_tools_list_and_show(env: dict[str, str]) -> None:
    code, stdout, stderr = invoke(env, "--user", "basic", "tools", "list", "--category", "system")
    assert code == 0
    assert re.search(r"system\s+│ probe/sleep\s+│ safe\s+│ yes", stdout), stdout
    assert "probe/echo" not in stdout
    assert "1 tool in 1 category; you (basic, execute_basic) may run 1" in stderr
    assert "unavailable broken" in stderr  # the unreachable server is reported, the others still listed

    code, stdout, stderr = invoke(env, "--user", "advanced", "--json", "tools", "list")
    listing = json.loads(stdout)
    tools = {t["name"]: t for t in listing["tools"]}
    assert code == 0 and "probe/pid" not in tools  # deprecated
    assert listing["categories"] == ["database", "system", "memory", "agent"]  # CATEGORIES order
    assert [t["name"] for t in listing["categorizedTools"]["memory"]] == ["probe/echo"]
    assert {n: (tools[n]["risk"], tools[n]["runnable"]) for n in ("probe/add", "probe/make-number", "probe/fail")} == {
        "probe/add": ("moderate", True),
        "probe/make-number": ("dangerous", False),
        "probe/fail": ("dangerous", False),
    }
    assert tools["probe/fail"]["riskSource"] == "default" and tools["probe/add"]["riskSource"] == "operator"
    assert listing["user"] == {"name": "advanced", "level": "execute_advanced"}
    assert "broken" in listing["errors"]

    code, stdout, _ = invoke(
        env, "--user", "basic", "--json", "tools", "list", "--server", "probe", "--tag", "demo", "--include-deprecated"
    )
    assert code == 0 and [t["name"] for t in json.loads(stdout)["tools"]] == ["probe/echo", "probe/pid"]
    code, _, stderr = invoke(env, "tools", "list", "--category", "gadgets")
    assert code == 2 and "unknown category 'gadgets': use one of browser, file" in stderr

    assert invoke(env, "--user", "basic", "tools", "call", "probe/echo", "--args", '{"text": "hi"}')[0] == 0
    code, stdout, _ = invoke(env, "--user", "basic", "tools", "show", "probe/echo")
    assert code == 0
    for line in (
        "probe/echo (server probe)",
        "Echo text back with its length.",
        "category     memory",
        'risk         safe — set by the operator ("risk" in mcp.json, or the engine config)',
        "you may run  yes (basic, execute_basic)",
        "tags         text, demo",
        "version      1.2.0",
        "status       enabled",
        '"text": {',
        "metrics:     calls 1: 1 ok, 0 failed, 0 cancelled",
        "your use:    executions 1: 1 ok",
    ):
        assert line in stdout, line
    code, stdout, _ = invoke(env, "--user", "basic", "--json", "tools", "show", "probe/make-number")
    details = json.loads(stdout)
    assert code == 0 and details["tool"]["runnable"] is False and details["tool"]["risk"] == "dangerous"
    assert details["metrics"]["totalInvocations"] == 0 and details["userStats"]["user"] == "basic"
    code, _, stderr = invoke(env, "tools", "show", "echo")
    assert code == 2 and "Tool 'echo' must include namespace" in stderr


# -- runs cancel from another process ----------------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_tools_call_timeout_is_reported_before_the_busy_server_is_torn_down(env: dict[str, str]) -> None:
    proc = subprocess.Popen(
        [
            str(TOOLAGENT),
            "--db",
            env["db"],
            "--servers",
            env["servers"],
            "--user",
            "basic",
            "tools",
            "call",
            "probe/sleep",
            "--args",
            '{"seconds": 60, "tag": "held"}',
            "--timeout",
            "1000",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TERM": "dumb"},
    )
    try:
        assert proc.stderr is not None
        seen: list[str] = []
        for line in proc.stderr:
            seen.append(line)
            if "error: cancelled: timeout after 1000 ms" in line:
                # The report arrives while the CLI still runs and its server is not yet torn down.
                running, server_up = proc.poll() is None, _alive(_server_pid(env))
                break
        else:
            pytest.fail(f"no timeout error on stderr: {''.join(seen)}")
        assert running and server_up, "the error was printed only after the server was torn down"
        assert proc.wait(timeout=60) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def _server_pid(env: dict[str, str]) -> int:
    calls = [e for e in read_log(Path(env["log"])) if e["event"] == "call" and e.get("tag") == "held"]
    assert calls, "the probe server never saw the call"
    return int(calls[-1]["pid"])


def _lines(stream: Any, into: list[str]) -> None:
    for line in stream:
        into.append(line)


@pytest.fixture
def background_build(env: dict[str, str]) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    proc = subprocess.Popen(
        [str(TOOLAGENT), "--db", env["db"], "--servers", env["servers"], "--user", "basic", "build", env["sleeper"]],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TERM": "dumb"},
    )
    lines: list[str] = []
    reader = threading.Thread(target=_lines, args=(proc.stderr, lines), daemon=True)
    reader.start()
    try:
        yield proc, lines
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        reader.join(timeout=5)


def test_lifecycle_log_lines_on_request_with_the_execution_context(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # By default the command's own report is all: no lifecycle lines.
    code, _, stderr = invoke(env, "--user", "basic", "tools", "call", "probe/make-number", "--args", '{"value": 1}')
    assert code == 1 and "error: denied" in stderr and "toolagent.lifecycle" not in stderr
    assert "execution_denied" not in stderr

    monkeypatch.setenv("TOOLAGENT_LOG_FORMAT", "json")
    monkeypatch.setenv("TOOLAGENT_LOG_LEVEL", "info")
    code, _, stderr = invoke(env, "--user", "basic", "tools", "call", "probe/echo", "--args", '{"text": "hi"}')
    assert code == 0, stderr
    [finished] = [
        json.loads(line)
        for line in stderr.splitlines()
        if line.startswith("{") and json.loads(line).get("event") == "execution_finished"
    ]
    assert (finished["logger"], finished["level"], finished["tool"], finished["user"], finished["status"]) == (
        "toolagent.lifecycle",
        "info",
        "probe/echo",
        "basic",
        "success",
    )
    # The command's first report line names the execution (a slow server start may print a line before it).
    report = next(line for line in stderr.splitlines() if not line.startswith("starting MCP server"))
    assert re.fullmatch(r"exec_\w+", finished["execution_id"]) and finished["execution_id"] in report
    code, _, stderr = invoke(env, "--user", "basic", "tools", "call", "probe/make-number", "--args", '{"value": 1}')
    [denied] = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]  # one line, not two
    assert (denied["level"], denied["event"], denied["user"], denied["tool"]) == (
        "warning",
        "execution_denied",
        "basic",
        "probe/make-number",
    )
    assert "requires admin" in denied["reason"]


def test_serve_logs_denied_executions_with_their_context(env: dict[str, str], tmp_path: Path) -> None:
    code, key, stderr = invoke(env, "keys", "create", "--user", "basic")
    assert code == 0, stderr
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [
                str(TOOLAGENT),
                "--db",
                env["db"],
                "--servers",
                env["servers"],
                "serve",
                "--port",
                str(port),
                "--log-level",
                "warning",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "TOOLAGENT_LOG_FORMAT": "json"},
        )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/ready", timeout=2).status_code == 200:
                    break
            time.sleep(0.1)
        response = httpx.post(
            f"{url}/api/tools/execute",
            headers={"Authorization": f"Bearer {key.strip()}"},
            json={"name": "probe/make-number", "arguments": {"value": 1}},
            timeout=30,
        )
        assert response.status_code == 403, response.text
    finally:
        server.terminate()
        server.wait(timeout=30)
    [denied] = [
        json.loads(line)
        for line in log.read_text().splitlines()
        if line.startswith("{") and json.loads(line).get("event") == "execution_denied"
    ]
    assert (denied["level"], denied["logger"], denied["user"], denied["tool"]) == (
        "warning",
        "toolagent.lifecycle",
        "basic",
        "probe/make-number",
    )
    assert re.fullmatch(r"exec_\w+", denied["execution_id"]) and "requires admin" in denied["reason"]


def sleeping_run(env: dict[str, str], proc: subprocess.Popen[str], lines: list[str]) -> str:
    """The id of the background build's run, once its sleep step is running."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        # The other process announces its run, then its sleep step shows up as a running execution.
        match = re.search(r"run (run_\w+) started; stop it with: toolagent runs cancel \1", "".join(lines))
        if match and json.loads(invoke(env, "--user", "basic", "--json", "executions", "active")[1])["count"] == 1:
            return match.group(1)
        assert proc.poll() is None, "".join(lines)
        time.sleep(0.1)
    pytest.fail(f"the run did not start its sleep step: {''.join(lines)}")


def test_runs_cancel_from_another_process(
    env: dict[str, str], background_build: tuple[subprocess.Popen[str], list[str]]
) -> None:
    proc, lines = background_build
    run_id = sleeping_run(env, proc, lines)

    # Not the owner and not an admin: the run does not exist for them, and it keeps running.
    code, _, stderr = invoke(env, "--user", "advanced", "runs", "cancel", run_id)
    assert code == 1 and f"run '{run_id}' not found among your runs" in stderr
    code, stdout, _ = invoke(env, "--user", "basic", "runs", "cancel", run_id, "--wait", "20")
    assert code == 0 and stdout == f"run {run_id}: cancelled (1 running step(s) cancelled)\n"

    assert proc.wait(timeout=30) == 1
    output = "".join(lines)
    assert "⊗ probe/sleep" in output and "cancelled by basic" in output and f"run {run_id}: cancelled" in output
    code, stdout, _ = invoke(env, "--json", "runs", "show", run_id)
    shown = json.loads(stdout)
    assert shown["status"] == "cancelled" and shown["user"] == "basic"
    assert [(s["tool"], s["status"]) for s in shown["steps"]] == [
        ("probe/sleep", "cancelled"),
        ("probe/echo", "cancelled"),
    ]
    code, stdout, _ = invoke(env, "--user", "basic", "--json", "history")
    [sleep] = json.loads(stdout)["executions"]
    assert (sleep["toolName"], sleep["status"], sleep["reason"], sleep["runId"]) == (
        "probe/sleep",
        "cancelled",
        "cancelled by basic",
        run_id,
    )
    assert [e["tag"] for e in read_log(Path(env["log"])) if e["event"] == "cancelled"] == ["long"]
    code, _, stderr = invoke(env, "--user", "basic", "runs", "cancel", run_id)
    assert code == 2 and f"run '{run_id}' is not running (it ended cancelled)" in stderr


def test_a_killed_build_is_closed_as_interrupted(
    env: dict[str, str], background_build: tuple[subprocess.Popen[str], list[str]]
) -> None:
    proc, lines = background_build
    run_id = sleeping_run(env, proc, lines)
    deadline = time.monotonic() + 30
    while json.loads(invoke(env, "--json", "runs", "show", run_id)[1])["steps"][0]["status"] != "running":
        assert time.monotonic() < deadline, "the sleep step was never recorded running"
        time.sleep(0.1)
    proc.kill()  # SIGKILL: no chance to record anything
    proc.wait(timeout=30)

    # The next command to open the store closes the run; the next engine closes its execution.
    code, stdout, stderr = invoke(env, "--json", "runs", "show", run_id)
    assert code == 0, stderr
    shown = json.loads(stdout)
    error = f"interrupted: process {proc.pid} on {socket.gethostname()} ended before it finished"
    assert (shown["status"], shown["error"]) == ("failed", error)
    assert [(s["tool"], s["status"], s["error"]) for s in shown["steps"]] == [
        ("probe/sleep", "failed", error),
        ("probe/echo", "skipped", None),
    ]
    code, stdout, stderr = invoke(env, "--json", "deliverables", "show", run_id)
    assert code == 0, stderr
    deliverable = json.loads(stdout)
    assert deliverable["type"] == "interrupted-run" and deliverable["metadata"]["interrupted"] is True
    assert deliverable["data"]["error"] == error
    assert [(r["tool"], r["status"]) for r in deliverable["data"]["results"]] == [
        ("probe/sleep", "failed"),
        ("probe/echo", "skipped"),
    ]
    code, stdout, _ = invoke(env, "--user", "basic", "--json", "history")
    [sleep] = json.loads(stdout)["executions"]
    assert (sleep["toolName"], sleep["status"], sleep["runId"]) == ("probe/sleep", "failed", run_id)
    assert sleep["reason"] == "interrupted"


# -- the demo ----------------------------------------------------------------------------------------


def test_demo_runs_through_the_engine_as_the_local_user(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "SUPABASE_DEMO_DB": str(tmp_path / "demo.sqlite"),
        "TOOLAGENT_MCP_CONFIG": str(REPO_ROOT / "mcp.json"),
    }
    env.pop("TOOLAGENT_USER", None)
    env.pop("TOOLAGENT_ENGINE_CONFIG", None)
    demo = subprocess.run([str(TOOLAGENT), "demo"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=90)
    assert demo.returncode == 0, demo.stderr
    assert re.search(r"run (run_\w+) started; stop it with: toolagent runs cancel \1", demo.stderr)
    history = subprocess.run(
        [str(TOOLAGENT), "--json", "history"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    rows = json.loads(history.stdout)["executions"]
    assert sorted((r["toolName"], r["status"], r["level"], r["risk"]) for r in rows) == [
        (f"supabase/{t}", "success", "execute_basic", "safe")
        for t in ("analyze-results", "execute-sql", "generate-sql", "get-schema")
    ]
