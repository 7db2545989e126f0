"""Errors that teach, run as a new user would: a tool name without its namespace suggests the
configured `namespace/tool`, a denial of an unrated server's tool leads with rating the server,
and a build of a file says that the agent is not stored."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from _support.mcp_harness import probe_config
from _support.repo import REPO_ROOT

pytestmark = pytest.mark.timeout(300)
TOOLAGENT = Path(sys.executable).parent / "toolagent"


def toolagent(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("TOOLAGENT_")}
    env = {**base, "SUPABASE_DEMO_DB": str(cwd / "demo.sqlite")}
    return subprocess.run(
        [str(TOOLAGENT), "--db", str(cwd / "s.db"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=150,
        env=env,
    )


def test_a_tool_name_without_namespace_suggests_the_configured_one(tmp_path: Path) -> None:
    proc = toolagent("--servers", str(REPO_ROOT / "mcp.json"), "tools", "call", "get-schema", cwd=tmp_path)
    assert proc.returncode == 2
    assert "Tool 'get-schema' must include namespace" in proc.stderr
    assert "did you mean 'supabase/get-schema'?" in proc.stderr
    # A near miss is matched too.
    proc = toolagent("--servers", str(REPO_ROOT / "mcp.json"), "tools", "show", "get-shema", cwd=tmp_path)
    assert proc.returncode == 2 and "did you mean 'supabase/get-schema'?" in proc.stderr


def test_a_build_of_a_file_with_a_bare_tool_name_suggests_it_and_a_good_one_says_it_is_not_stored(
    tmp_path: Path,
) -> None:
    source = yaml.safe_load((REPO_ROOT / "agents" / "supabase-agent.yaml").read_text())
    tools = source["configuration"]["tools"]
    bare = {**source, "configuration": {**source["configuration"], "tools": ["get-schema", *tools[1:]]}}
    (tmp_path / "bare.yaml").write_text(yaml.safe_dump(bare))
    servers = str(REPO_ROOT / "mcp.json")
    proc = toolagent("--servers", servers, "build", "bare.yaml", "-p", '{"query": "x"}', cwd=tmp_path)
    assert proc.returncode == 2
    assert (
        "bare.yaml: configuration.tools[0]: Tool 'get-schema' must include namespace: expected 'namespace/tool'; "
        "did you mean 'supabase/get-schema'?"
    ) in proc.stderr
    agent = str(REPO_ROOT / "agents" / "supabase-agent.yaml")
    proc = toolagent("--servers", servers, "build", agent, "-p", '{"query": "users per organization"}', cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"agent demo/supabase-agent was read from {agent} and is not stored" in proc.stderr
    assert f"`toolagent agents upsert {agent}` stores it" in proc.stderr


def test_an_unrated_servers_tool_is_denied_with_rating_the_server_first(tmp_path: Path) -> None:
    config = tmp_path / "mine.json"
    config.write_text(json.dumps({"mcpServers": {"mine": probe_config()}}))
    proc = toolagent(
        "--servers", str(config), "tools", "call", "mine/make-number", "--args", '{"value": 1}', cwd=tmp_path
    )
    assert proc.returncode == 1
    assert "(risk dangerous)" in proc.stderr
    fix = next(line for line in proc.stderr.splitlines() if "fix:" in line)
    assert fix.strip().startswith(
        "fix: rate the server: nobody rated 'mine/make-number', so it counts as dangerous; "
        f"""set "risk" on server 'mine' in {config}"""
    )
    assert fix.index('"risk"') < fix.index("toolagent users set-level")
