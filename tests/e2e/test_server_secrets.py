"""Secrets for servers over the real stdio transport: a `${file:PATH}` value reaches the server's
environment and appears in no store file and no output, even with --debug; a missing secret stops
the command at start, naming the secret."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from _support.mcp_harness import free_port, probe_config, read_log

pytestmark = pytest.mark.timeout(300)
TOOLAGENT = Path(sys.executable).parent / "toolagent"


def toolagent(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLAGENT_")}
    return subprocess.run(
        [str(TOOLAGENT), "--db", str(cwd / "s.db"), "--servers", str(cwd / "mcp.json"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=150,
        env=env,
    )


def test_a_file_secret_reaches_the_server_and_nothing_else(tmp_path: Path) -> None:
    # The probe server logs its calls to the file its PROBE_LOG names: here that name is the
    # secret, so the log's existence proves the server got the value.
    secret_value = str(tmp_path / f"probe-{secrets.token_hex(8)}.log")
    (tmp_path / "probe-log.secret").write_text(secret_value + "\n")
    entry = probe_config(risk="safe")
    entry["env"] = {"PROBE_LOG": "${file:probe-log.secret}"}
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"probe": entry}}))

    proc = toolagent("--debug", "tools", "call", "probe/echo", "--args", '{"text": "hi"}', cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert [e["tool"] for e in read_log(Path(secret_value)) if e["event"] == "call"] == ["echo"]
    listed = toolagent("--json", "--debug", "tools", "list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    needle = Path(secret_value).name
    for output in (proc.stdout, proc.stderr, listed.stdout, listed.stderr):
        assert needle not in output
    store_files = [p for p in tmp_path.iterdir() if p.name.startswith("s.db")]
    assert store_files
    for path in store_files:
        assert needle.encode() not in path.read_bytes(), path


def test_a_missing_secret_stops_the_command_at_start_naming_it(tmp_path: Path) -> None:
    entry = probe_config(risk="safe")
    entry["env"] = {"API_KEY": "${secret:probe_api_key}"}
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"probe": entry}, "secrets_dir": "secrets"}))
    for args in (["tools", "list"], ["serve", "--port", str(free_port())]):
        proc = toolagent(*args, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert f"secret 'probe_api_key' {tmp_path / 'secrets' / 'probe_api_key'} does not exist" in proc.stderr
        assert "mcpServers.probe.env.API_KEY" in proc.stderr


def test_a_direct_answer_is_masked_as_its_stored_record(tmp_path: Path) -> None:
    # The probe's echo answers the text it was sent: a secret by its form comes back masked,
    # in the plain and the --json answer alike (no option shows it in clear).
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"probe": probe_config(risk="safe")}}))
    secret = "AKIAIOSFODNN7EXAMPLE"
    arguments = json.dumps({"text": f"rotate {secret} soon"})
    for flags in ([], ["--json"]):
        proc = toolagent(*flags, "tools", "call", "probe/echo", "--args", arguments, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "rotate [REDACTED] soon" in proc.stdout, proc.stdout
        assert secret not in proc.stdout + proc.stderr
