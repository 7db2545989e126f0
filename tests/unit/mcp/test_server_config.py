"""The mcpServers config: transports, ${VAR} expansion, operator keys, clear errors."""

from __future__ import annotations

import json
import os
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


# -- several files: --servers given twice, `include` ---------------------------------------------


def _write(path: Path, servers: dict[str, object], **top: object) -> str:
    path.write_text(json.dumps({"mcpServers": servers, **top}))
    return str(path)


def test_several_files_merge_and_each_server_knows_its_file(tmp_path: Path) -> None:
    mine = _write(tmp_path / "mine.json", {"mine": {"command": "node", "args": ["x.js"]}}, connect_timeout_s=9)
    shipped = _write(tmp_path / "shipped.json", {"supabase": {"command": "python", "connect_timeout_s": 3}})
    config = ServersConfig.load(os.pathsep.join([mine, shipped]))
    assert list(config.enabled) == ["mine", "supabase"]
    assert (config.file_of("mine"), config.file_of("supabase")) == (mine, shipped)
    assert config.files == [mine, shipped]
    # A file's top-level connect timeout stays its own servers' default.
    assert config.mcpServers["mine"].connect_timeout_s == 9
    assert config.mcpServers["supabase"].connect_timeout_s == 3


def test_a_server_defined_in_two_files_is_an_error_naming_both(tmp_path: Path) -> None:
    one = _write(tmp_path / "one.json", {"db": {"command": "a"}})
    two = _write(tmp_path / "two.json", {"db": {"url": "http://127.0.0.1:9/mcp"}})
    with pytest.raises(ServerConfigError) as caught:
        ServersConfig.load(os.pathsep.join([one, two]))
    assert f"server 'db' is defined in both {one} and {two}" in caught.value.message
    assert "rename it in one file" in caught.value.message


def test_include_reads_other_files_relative_to_the_including_one(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    _write(tmp_path / "shared" / "base.json", {"base": {"command": "b", "cwd": "work"}})
    top = _write(tmp_path / "mcp.json", {"mine": {"command": "m"}}, include=["shared/base.json"])
    config = ServersConfig.load(top)
    assert list(config.enabled) == ["mine", "base"]
    assert config.file_of("base") == str(tmp_path / "shared" / "base.json")
    # A relative cwd is relative to the file that defines the server.
    assert config.mcpServers["base"].cwd == str(tmp_path / "shared" / "work")  # type: ignore[union-attr]


def test_an_include_cycle_and_an_included_collision_are_refused(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.json", {"x": {"command": "x"}}, include=["b.json"])
    _write(tmp_path / "b.json", {"y": {"command": "y"}}, include=["a.json"])
    with pytest.raises(ServerConfigError, match="include cycle: .*a.json -> .*b.json -> .*a.json"):
        ServersConfig.load(a)
    c = _write(tmp_path / "c.json", {"x": {"command": "x"}}, include=["d.json"])
    _write(tmp_path / "d.json", {"x": {"command": "other"}})
    with pytest.raises(ServerConfigError, match=r"server 'x' is defined in both .*c.json and .*d.json"):
        ServersConfig.load(c)


# -- secrets: ${file:PATH}, ${secret:NAME} --------------------------------------------------------


def test_file_and_secret_references_read_files_relative_to_the_config(tmp_path: Path) -> None:
    (tmp_path / "token.txt").write_text("s3cret-from-file\n")
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "api_key").write_text("s3cret-from-dir")
    path = _write(
        tmp_path / "mcp.json",
        {
            "a": {"command": "a", "env": {"TOKEN": "${file:token.txt}", "KEY": "${secret:api_key}"}},
            "b": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer ${secret:api_key}"}},
        },
        secrets_dir="secrets",
    )
    config = ServersConfig.load(path)
    a, b = config.mcpServers["a"], config.mcpServers["b"]
    assert isinstance(a, StdioServer) and a.env == {"TOKEN": "s3cret-from-file", "KEY": "s3cret-from-dir"}
    assert isinstance(b, HttpServer) and b.headers == {"Authorization": "Bearer s3cret-from-dir"}
    # Values stay out of every printed form of the config.
    assert "s3cret" not in repr(config) and "s3cret" not in str(config.mcpServers)


def test_a_missing_secret_is_an_error_naming_it_when_the_config_loads(tmp_path: Path) -> None:
    path = _write(tmp_path / "mcp.json", {"a": {"command": "a", "env": {"KEY": "${secret:api_key}"}}}, secrets_dir="s")
    with pytest.raises(ServerConfigError) as caught:
        ServersConfig.load(path)
    message = caught.value.message
    assert f"secret 'api_key' {tmp_path / 's' / 'api_key'} does not exist: create or mount it" in message
    assert "mcpServers.a.env.KEY" in message
    path = _write(tmp_path / "mcp.json", {"a": {"command": "a", "env": {"KEY": "${file:/nonexistent/key}"}}})
    with pytest.raises(ServerConfigError, match="secret file /nonexistent/key does not exist"):
        ServersConfig.load(path)
    # A default stands in for a missing file, as for a variable; `/` cannot leave the secrets directory.
    path = _write(tmp_path / "mcp.json", {"a": {"command": "a", "env": {"KEY": "${secret:none:-}"}}})
    assert ServersConfig.load(path).mcpServers["a"].env == {"KEY": ""}  # type: ignore[union-attr]
    path = _write(tmp_path / "mcp.json", {"a": {"command": "a", "env": {"KEY": "${secret:../etc/passwd}"}}})
    with pytest.raises(ServerConfigError, match="must name a file in the secrets directory"):
        ServersConfig.load(path)


def test_a_substituted_value_is_never_expanded_again(tmp_path: Path) -> None:
    (tmp_path / "private").write_text("do not read")
    cfg = ServersConfig.from_data(
        {"mcpServers": {"a": {"command": "a", "env": {"X": "${INNER}"}}}},
        environ={"INNER": "${file:private}"},
        base=tmp_path,
    )
    assert cfg.mcpServers["a"].env == {"X": "${file:private}"}  # type: ignore[union-attr]
