"""The mcpServers config: transports, ${VAR} expansion, operator keys, clear errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from toolagent.errors import EnvVarMissing, ServerConfigError
from toolagent.mcp.config import HttpServer, ServersConfig, StdioServer


def test_stdio_and_http_servers_are_told_apart() -> None:
    cfg = ServersConfig.from_data(
        {
            "mcpServers": {
                "a": {"command": "node", "args": ["x.js"], "env": {"K": "v"}, "cwd": "/tmp"},
                "b": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer t"}},
            }
        }
    )
    a, b = cfg.mcpServers["a"], cfg.mcpServers["b"]
    assert isinstance(a, StdioServer) and a.args == ["x.js"] and a.env == {"K": "v"}
    assert isinstance(b, HttpServer) and b.headers == {"Authorization": "Bearer t"}


def test_python_means_this_interpreter() -> None:
    cfg = ServersConfig.from_data({"mcpServers": {"p": {"command": "python", "args": ["-m", "x"]}}})
    assert cfg.mcpServers["p"].command == sys.executable  # type: ignore[union-attr]


def test_env_vars_expand_with_defaults() -> None:
    cfg = ServersConfig.from_data(
        {"mcpServers": {"b": {"url": "http://${HOST}:${PORT:-8080}/mcp", "headers": {"X": "${TOKEN:-}"}}}},
        environ={"HOST": "127.0.0.1"},
    )
    server = cfg.mcpServers["b"]
    assert isinstance(server, HttpServer)
    assert server.url == "http://127.0.0.1:8080/mcp" and server.headers == {"X": ""}


def test_missing_env_var_is_named() -> None:
    with pytest.raises(EnvVarMissing) as info:
        ServersConfig.from_data({"mcpServers": {"s": {"command": "x", "env": {"K": "${SECRET_X}"}}}}, environ={})
    assert "Required environment variable SECRET_X is not set" in info.value.message
    assert "mcpServers.s.env.K" in info.value.message


def test_operator_keys_per_server_and_per_tool() -> None:
    cfg = ServersConfig.from_data(
        {
            "mcpServers": {
                "s": {
                    "command": "x",
                    "timeout_s": 5,
                    "tool_timeouts_s": {"slow": 60},
                    "risk": {"read": "safe", "rm": "dangerous"},
                    "category": "file",
                    "trusted": True,
                    "sql_tools": ["q"],
                }
            }
        }
    )
    s = cfg.mcpServers["s"]
    assert s.timeout_for("slow") == 60 and s.timeout_for("read") == 5
    assert s.risk_for("rm") == "dangerous" and s.risk_for("other") is None
    assert s.category_for("anything") == "file" and s.trusted and s.sql_tools == ["q"]


def test_disabled_servers_are_left_out() -> None:
    cfg = ServersConfig.from_data({"mcpServers": {"on": {"command": "x"}, "off": {"command": "y", "disabled": True}}})
    assert list(cfg.enabled) == ["on"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"mcpServers": {"s": {"args": []}}}, "needs `command` (stdio), `url` (streamable HTTP) or `python`"),
        ({"mcpServers": {"s": {"python": "notes.tools"}}}, "`python` must be `package.module:attr`"),
        ({"mcpServers": {"s": {"python": "a:b", "connect_timeout_s": 5}}}, "`connect_timeout_s` has no meaning"),
        ({"mcpServers": {"s": {"python": "a:b", "env": {}}}}, "Extra inputs are not permitted"),
        ({"mcpServers": {"s": {"command": "x", "timeout": 3}}}, "Extra inputs are not permitted"),
        ({"mcpServers": {"s": {"url": "ftp://x"}}}, "should match pattern"),
        ({"mcpServers": {"a/b": {"command": "x"}}}, "cannot be a namespace"),
        ({"mcpServers": {"s": {"command": "x", "risk": "scary"}}}, "safe"),
    ],
)
def test_invalid_configs_say_what_to_change(data: dict, message: str) -> None:
    with pytest.raises(ServerConfigError) as info:
        ServersConfig.from_data(data)
    assert message in info.value.message


def test_load_reads_file_and_resolves_relative_cwd(tmp_path: Path) -> None:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": {"s": {"command": "x", "cwd": "sub"}}}))
    cfg = ServersConfig.load(str(path))
    assert cfg.mcpServers["s"].cwd == str(tmp_path / "sub")  # type: ignore[union-attr]


def test_load_reports_bad_json_position(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"mcpServers": {\n  "s": }')
    with pytest.raises(ServerConfigError, match="invalid JSON at line 2, column 8"):
        ServersConfig.load(str(path))


def test_env_variable_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "env.json"
    path.write_text(json.dumps({"mcpServers": {"s": {"command": "x"}}}))
    monkeypatch.setenv("TOOLAGENT_MCP_CONFIG", str(path))
    assert list(ServersConfig.load().mcpServers) == ["s"]


def test_repo_config_configures_the_supabase_server() -> None:
    cfg = ServersConfig.load(str(Path(__file__).resolve().parents[3] / "mcp.json"))
    server = cfg.mcpServers["supabase"]
    assert isinstance(server, StdioServer) and server.args == ["-m", "toolagent.servers.supabase"]
    assert server.risk == "safe" and "execute-sql" in server.sql_tools
