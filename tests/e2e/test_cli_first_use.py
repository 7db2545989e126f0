"""A new user's first commands, run as subprocesses: global options anywhere, help text, start-up
imports, tables at 80 columns, and the messages of a first build, a missing file and a busy port."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _support.repo import REPO_ROOT

pytestmark = pytest.mark.timeout(300)
TOOLAGENT = Path(sys.executable).parent / "toolagent"


def toolagent(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 150
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("TOOLAGENT_")}
    return subprocess.run(
        [str(TOOLAGENT), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**base, "TOOLAGENT_MCP_CONFIG": str(REPO_ROOT / "mcp.json"), **(env or {})},
    )


# -- global options ----------------------------------------------------------------------------


def test_global_options_after_the_command_work_like_before_it(tmp_path: Path) -> None:
    db = str(tmp_path / "store.db")
    assert toolagent("--db", db, "users", "add", "bob", "--level", "view_only", cwd=tmp_path).returncode == 0
    servers = str(REPO_ROOT / "mcp.json")
    env = {"SUPABASE_DEMO_DB": str(tmp_path / "demo.sqlite")}
    before = toolagent(
        "--db",
        db,
        "--servers",
        servers,
        "--json",
        "--user",
        "bob",
        "build",
        str(REPO_ROOT / "agents" / "supabase-agent.yaml"),
        "-p",
        '{"query": "users per organization"}',
        cwd=tmp_path,
        env=env,
    )
    after = toolagent(
        "build",
        str(REPO_ROOT / "agents" / "supabase-agent.yaml"),
        "-p",
        '{"query": "users per organization"}',
        "--servers",
        servers,
        "--json",
        "--user",
        "bob",
        "--db",
        db,
        cwd=tmp_path,
        env=env,
    )
    assert before.returncode == after.returncode == 1, (before.stderr, after.stderr)
    first, second = json.loads(before.stdout), json.loads(after.stdout)
    for run in (first, second):
        steps = run["deliverable"]["data"]["results"]
        assert steps[0]["status"] == "denied" and "user 'bob' (view_only)" in steps[0]["error"]
    # Both runs landed in the same store, as bob.
    runs = json.loads(toolagent("runs", "list", "--json", "--db", db, cwd=tmp_path).stdout)
    assert {r["id"] for r in runs} == {first["runId"], second["runId"]} and {r["user"] for r in runs} == {"bob"}


def test_a_command_keeps_its_own_option_of_a_global_name(tmp_path: Path) -> None:
    db = str(tmp_path / "store.db")
    assert toolagent("users", "add", "alice", "--db", db, cwd=tmp_path).returncode == 0
    created = toolagent("keys", "create", "--user", "alice", "--db", db, "--json", cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    keys = json.loads(toolagent("keys", "list", "--json", "--db", db, cwd=tmp_path).stdout)
    assert [k["user"] for k in keys] == ["alice"]


def _help_texts() -> dict[tuple[str, ...], str]:
    """The help of every command and group, rendered at 100 columns in one subprocess."""
    code = """
import importlib, json, sys
import typer.main
from typer.testing import CliRunner
from toolagent.cli import app
from toolagent.cli._app import COMMANDS
for module in {m for m, _ in COMMANDS.values()}:
    importlib.import_module(f"toolagent.cli.{module}")
root = typer.main.get_command(app)
def walk(cmd, path):
    yield path
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from walk(sub, [*path, name])
texts = {}
for path in walk(root, []):
    texts[" ".join(path)] = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "100"}).output
print(json.dumps(texts))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return {tuple(k.split()): v for k, v in json.loads(proc.stdout).items()}


def test_help_shows_global_options_everywhere_and_no_bool_metavar() -> None:
    texts = _help_texts()
    assert len(texts) > 40
    for path, text in texts.items():
        assert "Usage:" in text, path
        assert "<bool>" not in text, path
        assert not re.search(r"\bPRD\b|appendix|section \d+|FR-\d", text), path
        if path:  # every command and group below the root takes the global options
            for option in ("--db", "--json", "--debug", "--servers"):
                assert option in text, (path, option)
    # A command with its own --user keeps it (the key's owner), all others take the global one.
    assert "The user the key acts for" in texts[("keys", "create")]
    assert "Act as this user" in texts[("history",)]


def test_root_help_lists_every_command_with_its_own_first_line() -> None:
    texts = _help_texts()
    root = texts[()]
    for path in texts:
        if len(path) == 1:
            assert re.search(rf"│ {re.escape(path[0])}\s", root), path
    # The one-line table the root help uses, without importing the commands, matches each command.
    from toolagent.cli._app import COMMANDS

    for name, (_, line) in COMMANDS.items():
        assert " ".join(line.split()) in " ".join(texts[(name,)].split()), name


# -- start-up ----------------------------------------------------------------------------------

HEAVY = ("mcp", "sqlalchemy", "uvicorn", "fastapi")


def loaded_by(
    args: list[str], cwd: Path, env: dict[str, str] | None = None, modules: tuple[str, ...] = HEAVY
) -> list[object]:
    """`[which of modules were imported, exit code]` of `toolagent ARGS` run as a fresh process."""
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


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["sql", "check", "SELECT 1 FROM users LIMIT 1"],
        ["agents", "validate", str(REPO_ROOT / "agents" / "supabase-agent.yaml")],
    ],
)
def test_light_commands_load_neither_the_mcp_sdk_nor_the_store(args: list[str], tmp_path: Path) -> None:
    assert loaded_by(args, tmp_path) == [[], 0]


@pytest.mark.parametrize(
    "args", [["runs", "list"], ["history"], ["users", "list"], ["keys", "list"], ["executions", "active"], ["metrics"]]
)
def test_store_commands_open_the_runtime_without_loading_the_mcp_sdk(args: list[str], tmp_path: Path) -> None:
    # The runtime's catalogue loads the SDK with the server pool, which only tool-calling commands
    # open: importing it costs a store command about as much as everything else it does. The agent
    # loaders (with the template engine) and jsonschema load with the first definition or argument
    # checked.
    env = {**os.environ, "TOOLAGENT_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"}
    modules = ("mcp", "jinja2", "jsonschema", "toolagent.agents.loaders", "sqlalchemy")
    assert loaded_by(args, tmp_path, env, modules) == [["sqlalchemy"], 0]


# -- tables at 80 columns ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def used_store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A store after one demo run, a denied run, and an API key."""
    root = tmp_path_factory.mktemp("tables")
    env = {
        "TOOLAGENT_DATABASE_URL": f"sqlite+aiosqlite:///{root / 'store.db'}",
        "SUPABASE_DEMO_DB": str(root / "demo.sqlite"),
    }
    demo = toolagent("demo", "--json", cwd=root, env=env)
    assert demo.returncode == 0, demo.stderr
    assert (
        toolagent("users", "add", "a-user-with-a-long-name", "--level", "view_only", cwd=root, env=env).returncode == 0
    )
    assert (
        toolagent(
            "keys",
            "create",
            "--user",
            "a-user-with-a-long-name",
            "--label",
            "a long label for the key",
            cwd=root,
            env=env,
        ).returncode
        == 0
    )
    denied = toolagent("--user", "a-user-with-a-long-name", "demo", cwd=root, env=env)
    assert denied.returncode == 1
    return {"root": root, "env": env}


def _ids(used_store: dict[str, Any], *args: str) -> Any:
    proc = toolagent("--json", *args, cwd=used_store["root"], env=used_store["env"])
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize(
    "command", [["runs", "list"], ["history"], ["keys", "list"], ["metrics"], ["agents", "list"], ["audit", "list"]]
)
def test_tables_at_80_columns_keep_ids_and_tool_names_whole(used_store: dict[str, Any], command: list[str]) -> None:
    expected = {
        "runs": lambda: [r["id"] for r in _ids(used_store, "runs", "list")] + ["demo/supabase-agent"],
        "history": lambda: (
            [e["id"] for e in _ids(used_store, "history")["executions"]]
            + [e["toolName"] for e in _ids(used_store, "history")["executions"]]
        ),
        "keys": lambda: [k["id"] for k in _ids(used_store, "keys", "list")],
        "metrics": lambda: [t["tool"] for t in _ids(used_store, "metrics")["tools"]],
        "agents": lambda: ["demo/supabase-agent", "supabase/analyze-results", "supabase/generate-sql"],
        "audit": lambda: sorted({r["tool"] for r in _ids(used_store, "audit", "list") if r.get("tool")}),
    }[command[0]]()
    assert expected
    proc = toolagent(*command, cwd=used_store["root"], env={**used_store["env"], "COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines and max(len(line) for line in lines) <= 80, proc.stdout
    for value in expected:
        assert any(re.search(rf"(^|\s){re.escape(value)}(\s|$)", line) for line in lines), (value, proc.stdout)
    assert "…" not in proc.stdout.replace("…   ", "").replace("… ", "") or command == ["keys", "list"]


def test_audit_list_at_80_columns_keeps_whole_words(used_store: dict[str, Any]) -> None:
    proc = toolagent("audit", "list", cwd=used_store["root"], env={**used_store["env"], "COLUMNS": "80"})
    words = set(proc.stdout.split())
    assert {"decision", "outcome", "success"} <= words, proc.stdout
    assert "denied" in words


# -- messages ----------------------------------------------------------------------------------


def test_a_first_build_without_payload_names_the_field_to_pass(tmp_path: Path) -> None:
    # The agent file reads its question from the payload (the seeded PRD record has none).
    proc = toolagent("build", str(REPO_ROOT / "agents" / "supabase-agent.yaml"), cwd=tmp_path)
    assert proc.returncode == 2
    assert "payload.query (supabase/generate-sql)" in proc.stderr
    assert """-p '{"query": "..."}'""" in proc.stderr
    assert "run_" not in proc.stderr  # refused before a run started


@pytest.mark.parametrize("ref", ["./missing.yaml", "missing.yaml", "agents/nope/agent.yaml"])
def test_a_missing_agent_file_is_reported_as_a_missing_file(tmp_path: Path, ref: str) -> None:
    proc = toolagent("build", ref, cwd=tmp_path)
    assert proc.returncode == 2
    assert "does not exist" in proc.stderr and "seed" not in proc.stderr


def test_db_takes_a_bare_file_path(tmp_path: Path) -> None:
    assert toolagent("--db", "./x.db", "users", "add", "carol", cwd=tmp_path).returncode == 0
    assert (tmp_path / "x.db").is_file()
    users = json.loads(
        toolagent("--json", "--db", f"sqlite+aiosqlite:///{tmp_path / 'x.db'}", "users", "list", cwd=REPO_ROOT).stdout
    )
    assert "carol" in {u["name"] for u in users}


def test_serve_on_a_busy_port_exits_3_before_its_banner(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = toolagent("serve", "--port", str(port), "--db", str(tmp_path / "s.db"), cwd=tmp_path, timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stderr
    assert "toolagent API on" not in proc.stderr


def test_the_lazy_command_table_names_every_registered_command() -> None:
    code = """
import importlib, pkgutil, json
import toolagent.cli as cli
from toolagent.cli._app import app, COMMANDS
for module in pkgutil.iter_modules(cli.__path__):
    if not module.name.startswith("_"):
        importlib.import_module(f"toolagent.cli.{module.name}")
names = {i.name or i.callback.__name__ for i in app.registered_commands} | {g.name for g in app.registered_groups}
print(json.dumps([sorted(names), sorted(COMMANDS)]))
"""
    registered, table = json.loads(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    )
    assert registered == table
