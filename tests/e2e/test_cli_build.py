"""`toolagent build`, `runs`, `deliverables` and `tools` from the command line, over real servers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from _support.mcp_harness import PROBE, probe_config, processes_matching
from typer.testing import CliRunner

from toolagent.cli import app

runner = CliRunner()
pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    servers = tmp_path / "mcp.json"
    # Steps go through the engine: the probe's tools are unclassified (dangerous) unless the
    # server config says otherwise, and the local user is execute_basic.
    servers.write_text(json.dumps({"mcpServers": {"probe": probe_config(risk="safe")}}))
    agent = tmp_path / "chain.yaml"
    agent.write_text(
        yaml.safe_dump(
            {
                "metadata": {"name": "chain", "displayName": "Chain"},
                "configuration": {
                    "tools": ["probe/make-number", "probe/double"],
                    "toolParams": {"probe/make-number": {"value": "{{payload.n}}"}},
                    "deliverable": {"format": "markdown", "type": "report"},
                },
            }
        )
    )
    failing = tmp_path / "failing.yaml"
    failing.write_text(
        yaml.safe_dump({"metadata": {"name": "failing"}, "configuration": {"tools": ["probe/fail", "probe/echo"]}})
    )
    return {
        "db": f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}",
        "servers": str(servers),
        "agent": str(agent),
        "failing": str(failing),
    }


def invoke(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--db", env["db"], "--servers", env["servers"], *args])
    return result.exit_code, result.stdout, result.stderr


def test_build_prints_deliverable_and_exit_zero(env: dict[str, str]) -> None:
    code, stdout, stderr = invoke(env, "build", env["agent"], "--payload", '{"n": 5}')
    assert code == 0, stderr
    assert stdout.startswith("# Chain: success")
    assert '"value": 10.0' in stdout
    assert "✓ probe/double" in stderr and "deliverable dlv_" in stderr


def test_build_json_then_runs_and_deliverables(env: dict[str, str]) -> None:
    code, stdout, _ = invoke(env, "--json", "build", env["agent"], "-p", '{"n": 1}', "--format", "text")
    assert code == 0
    built = json.loads(stdout)
    assert built["status"] == "success" and built["deliverable"]["format"] == "text"
    assert built["deliverable"]["metadata"]["toolsUsed"] == ["probe/make-number", "probe/double"]
    code, stdout, _ = invoke(env, "--json", "runs", "show", built["runId"])
    shown = json.loads(stdout)
    assert [s["status"] for s in shown["steps"]] == ["success", "success"]
    assert shown["steps"][1]["paramSources"] == {"value": "previous:probe/make-number.value"}
    code, stdout, _ = invoke(env, "--json", "runs", "list")
    assert [r["id"] for r in json.loads(stdout)] == [built["runId"]]
    code, stdout, _ = invoke(env, "deliverables", "show", built["deliverableId"])
    assert code == 0 and stdout.startswith("demo/chain run ")


def test_failed_run_exits_one_and_keeps_records(env: dict[str, str]) -> None:
    code, _, stderr = invoke(env, "--json", "build", env["failing"])
    assert code == 1
    code, stdout, _ = invoke(env, "--json", "runs", "list", "--status", "failed")
    [row] = json.loads(stdout)
    code, stdout, _ = invoke(env, "--json", "runs", "show", row["id"])
    assert [s["status"] for s in json.loads(stdout)["steps"]] == ["failed", "skipped"]


def test_payload_file_and_override(env: dict[str, str], tmp_path: Path) -> None:
    payload = tmp_path / "payload.json"
    payload.write_text('{"n": 2}')
    override = json.dumps({"toolParams": {"probe/make-number": {"value": 7}}})
    code, stdout, _ = invoke(env, "--json", "build", env["agent"], "-p", f"@{payload}", "-o", override)
    results = json.loads(stdout)["deliverable"]["data"]["results"]
    assert code == 0 and results[1]["structuredContent"]["value"] == 14.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["build", "AGENT", "-p", "{not json"], "--payload is not valid JSON"),
        (["build", "AGENT", "-o", '{"tool": []}'], "override key 'tool' is not allowed; did you mean 'tools'?"),
        (["build", "AGENT", "--format", "pdf"], "invalid --format 'pdf'"),
        (["build", "nope"], "neither an agent file nor ORG/SLUG"),
        (["tools", "call", "echo"], "Tool 'echo' must include namespace"),
        (["tools", "call", "probe/echo", "--timeout", "10"], "--timeout must be between 1000 and 300000 ms"),
    ],
)
def test_usage_errors_exit_two(env: dict[str, str], args: list[str], message: str) -> None:
    args = [env["agent"] if a == "AGENT" else a for a in args]
    code, _, stderr = invoke(env, *args)
    assert code == 2 and message in stderr and "Traceback" not in stderr


def test_missing_server_config_is_a_configuration_error(env: dict[str, str], tmp_path: Path) -> None:
    result = runner.invoke(app, ["--db", env["db"], "--servers", str(tmp_path / "none.json"), "build", env["agent"]])
    assert result.exit_code == 2 and "cannot read MCP server config" in result.stderr


def test_missing_environment_variable_in_config_is_named(env: dict[str, str], tmp_path: Path) -> None:
    cfg = tmp_path / "vars.json"
    cfg.write_text(
        json.dumps({"mcpServers": {"probe": {**probe_config(), "env": {"X": "${TOOLAGENT_TEST_UNSET_VAR}"}}}})
    )
    result = runner.invoke(app, ["--db", env["db"], "--servers", str(cfg), "tools", "list"])
    assert result.exit_code == 2
    assert "Required environment variable TOOLAGENT_TEST_UNSET_VAR is not set" in result.stderr


def test_tools_list_and_call(env: dict[str, str]) -> None:
    code, stdout, _ = invoke(env, "--json", "tools", "list", "--server", "probe")
    names = [t["name"] for t in json.loads(stdout)["tools"]]
    assert code == 0 and "probe/echo" in names and "probe/make-number" in names
    code, stdout, _ = invoke(env, "--json", "tools", "call", "probe/add", "--args", '{"a": 1, "b": 2}')
    execution = json.loads(stdout)
    assert code == 0 and execution["status"] == "success" and execution["toolName"] == "probe/add"
    assert execution["result"]["structuredContent"] == {"value": 3.0, "label": "sum"}
    code, _, stderr = invoke(env, "tools", "call", "probe/add", "--args", '{"a": "x"}')
    assert code == 2 and "`a`: 'x' is not of type 'number'" in stderr
    code, _, _ = invoke(env, "tools", "call", "probe/fail")
    assert code == 1


def test_console_script_leaves_no_server_process(env: dict[str, str]) -> None:
    exe = Path(sys.executable).parent / "toolagent"
    proc = subprocess.run(
        [str(exe), "--db", env["db"], "--servers", env["servers"], "build", env["agent"], "-p", '{"n": 3}'],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "# Chain: success" in proc.stdout
    assert processes_matching(str(PROBE)) == []
