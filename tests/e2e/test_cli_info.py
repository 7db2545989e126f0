"""Visible configuration: `toolagent info` and `--version`, the per-user default store (a `cd` keeps
the same agents, users and keys), an existing `./.toolagent/` store kept and named, and
not-found messages and the `serve` banner naming the store."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from _support.repo import REPO_ROOT

from toolagent import __version__

pytestmark = pytest.mark.timeout(300)
TOOLAGENT = Path(sys.executable).parent / "toolagent"


def toolagent(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("TOOLAGENT_")}
    return subprocess.run(
        [str(TOOLAGENT), *args], cwd=cwd, capture_output=True, text=True, timeout=120, env={**base, **(env or {})}
    )


def info(cwd: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    proc = toolagent("--json", *args, "info", cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_version_prints_the_package_version(tmp_path: Path) -> None:
    proc = toolagent("--version", cwd=tmp_path)
    assert (proc.returncode, proc.stdout.strip()) == (0, f"toolagent {__version__}")


def test_info_in_an_empty_folder_names_every_default_and_where_it_came_from(
    tmp_path: Path, _own_user_data_dir: Path
) -> None:
    report = info(tmp_path)
    assert report["version"] == __version__
    store = _own_user_data_dir / "toolagent" / "toolagent.db"
    assert report["store"] == {"url": f"sqlite+aiosqlite:///{store}", "from": "the per-user default"}
    servers = report["server_config"]
    assert isinstance(servers, dict) and servers["from"].startswith("the config shipped")
    assert "supabase" in servers["servers"]  # type: ignore[operator]
    assert report["engine_config"]["file"] is None  # type: ignore[index]
    assert report["user"]["from"].startswith("the local user")  # type: ignore[index]
    # `info` opens nothing: no store file is made by asking.
    assert not store.exists()


def test_info_tells_a_flag_from_an_environment_variable(tmp_path: Path) -> None:
    (tmp_path / "engine.yaml").write_text("retention_days: 7\n")
    env = {
        "TOOLAGENT_DATABASE_URL": "postgresql://ops:s3cret@db.example:5432/agents",
        "TOOLAGENT_ENGINE_CONFIG": str(tmp_path / "engine.yaml"),
        "TOOLAGENT_USER": "ci",
    }
    from_env = info(tmp_path, env=env)
    assert from_env["store"] == {
        "url": "postgresql+psycopg://ops:***@db.example:5432/agents",
        "from": "TOOLAGENT_DATABASE_URL",
    }
    assert from_env["user"] == {"name": "ci", "from": "TOOLAGENT_USER"}
    assert from_env["engine_config"] == {"file": str(tmp_path / "engine.yaml"), "from": "TOOLAGENT_ENGINE_CONFIG"}
    servers = str(REPO_ROOT / "mcp.json")
    flags = info(tmp_path, "--db", "x.db", "--servers", servers, "--user", "bob", env=env)
    assert flags["store"] == {"url": f"sqlite+aiosqlite:///{tmp_path / 'x.db'}", "from": "--db"}
    assert flags["user"] == {"name": "bob", "from": "--user"}
    assert flags["server_config"]["from"] == "--servers"  # type: ignore[index]
    # A global option after the command counts as a flag too.
    after = toolagent("info", "--json", "--user", "carol", cwd=tmp_path)
    assert json.loads(after.stdout)["user"] == {"name": "carol", "from": "--user"}


def test_info_as_text_shows_one_line_per_setting(tmp_path: Path) -> None:
    proc = toolagent("info", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    labels = [line.split("  ")[0] for line in proc.stdout.splitlines()]
    assert labels == ["version", "store", "server config", "servers", "engine config", "user"]


def test_the_default_store_is_the_same_from_any_working_directory(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    assert toolagent("users", "add", "dana", cwd=one).returncode == 0
    users = json.loads(toolagent("--json", "users", "list", cwd=two).stdout)
    assert "dana" in {u["name"] for u in users}
    assert not (one / ".toolagent").exists()


def test_an_existing_working_directory_store_keeps_working_and_is_named(tmp_path: Path) -> None:
    assert toolagent("--db", ".toolagent/toolagent.db", "users", "add", "erin", cwd=tmp_path).returncode == 0
    proc = toolagent("users", "list", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "erin" in proc.stdout
    assert f"using the store in this working directory (sqlite+aiosqlite:///{tmp_path}/.toolagent/toolagent.db)" in (
        proc.stderr
    )
    assert info(tmp_path)["store"]["from"] == "an existing ./.toolagent/ in the working directory"  # type: ignore[index]


def test_a_not_found_message_names_the_store_it_looked_in(tmp_path: Path) -> None:
    proc = toolagent("--db", "s.db", "users", "set-level", "nobody", "admin", cwd=tmp_path)
    assert proc.returncode != 0
    assert "user 'nobody' not found" in proc.stderr
    assert f"looked up in the store sqlite+aiosqlite:///{tmp_path / 's.db'}, from --db" in proc.stderr


def test_the_serve_banner_names_the_store(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (tmp_path / "none.json").write_text('{"mcpServers": {}}')
    base = {k: v for k, v in os.environ.items() if not k.startswith("TOOLAGENT_")}
    proc = subprocess.Popen(
        [str(TOOLAGENT), "serve", "--port", str(port), "--db", "api.db"],
        cwd=tmp_path,
        env={**base, "TOOLAGENT_MCP_CONFIG": str(tmp_path / "none.json")},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        lines = [proc.stderr.readline() for _ in range(2)]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert lines[0].startswith(f"toolagent API on http://127.0.0.1:{port}")
    assert lines[1].strip() == f"store: sqlite+aiosqlite:///{tmp_path / 'api.db'} (--db)"


# -- your config beside the shipped one ---------------------------------------------------------


def test_demo_uses_the_shipped_server_config_beside_a_mcp_json_of_ones_own(tmp_path: Path) -> None:
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"mine": {"command": "true"}}}))
    proc = toolagent("--json", "demo", cwd=tmp_path, env={"SUPABASE_DEMO_DB": str(tmp_path / "demo.sqlite")})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "success"


def test_an_unknown_namespace_names_the_config_files_loaded(tmp_path: Path) -> None:
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps({"mcpServers": {"mine": {"command": "true"}}}))
    shipped = str(REPO_ROOT / "mcp.json")
    proc = toolagent("--servers", str(mine), "--servers", shipped, "tools", "call", "nosuch/tool", cwd=tmp_path)
    assert proc.returncode != 0
    assert f"no server named 'nosuch' in {mine} and {shipped} (configured: mine, supabase)" in proc.stderr
    report = info(tmp_path, "--servers", str(mine), "--servers", shipped)
    assert report["server_config"]["files"] == [str(mine), shipped]  # type: ignore[index]
    assert report["server_config"]["servers"] == ["mine", "supabase"]  # type: ignore[index]
