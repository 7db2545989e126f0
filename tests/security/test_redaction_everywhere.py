"""Secrets a tool echoes back, or a BUILD payload carries, are masked in everything stored and shown:
runs, steps, executions, deliverables, the audit trail, API answers, CLI output and the server log;
the run itself still uses the real values. The echoing tool is the real `server-everything` over
stdio. Each row of `SECRETS` is one secret; add a line to add one."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from _support.api_harness import LiveServer, User, agent_body, live_server, provision
from _support.mcp_harness import node_config
from typer.testing import CliRunner

from toolagent.cli import app
from toolagent.model.redaction import REDACTED, redact, remember_secrets

pytestmark = [pytest.mark.timeout(180), pytest.mark.node]

#: (name, text the tool is made to echo, the part of it that must never be stored or shown)
SECRETS = [
    (
        "Anthropic API key",
        "key sk-ant-api03-Qx7Lm2Vb9Tz4Rw8Yp1Kd6Hs3Jf5Ng0Cq",
        "sk-ant-api03-Qx7Lm2Vb9Tz4Rw8Yp1Kd6Hs3Jf5Ng0Cq",
    ),
    (
        "JWT",
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0",
    ),
    ("URL password", "dsn postgresql://app:S3cretPassw0rd@db.internal:5432/prod", "S3cretPassw0rd"),
    ("AWS access key id", "aws AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("Slack bot token", "slack xoxb-123456789012-abcdefghijkl", "xoxb-123456789012-abcdefghijkl"),
    ("GitHub token", "gh ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5", "ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5"),
    ("password pair", "login password=Tr0ub4dor-and-3", "Tr0ub4dor-and-3"),
]
#: Sent under a sensitive key only: no shape gives it away, so only remembering it can mask it.
PAYLOAD_PASSWORD = "correct horse battery staple"
MESSAGE = " | ".join(text for _, text, _ in SECRETS)
PAYLOAD = {"message": MESSAGE, "password": PAYLOAD_PASSWORD}
#: Echo everything (the password too, through the template), then prove the real password was used:
#: the sum is its length, not the length of the mask.
DEFINITION = {
    "metadata": {"name": "leaky", "version": "1.0.0", "type": "tool"},
    "configuration": {
        "tools": ["everything/echo", "everything/get-sum"],
        "toolParams": {
            "everything/echo": {"message": "{{ payload.message }} || pw {{ payload.password }}"},
            "everything/get-sum": {"a": "{{ payload.password|length }}", "b": 0},
        },
        "deliverable": {"format": "markdown", "type": "report"},
    },
}
EVERYTHING = {**node_config("mcp-server-everything", "stdio"), "risk": "safe"}


def leaks(text: str) -> list[str]:
    """The names of the secrets found in `text`."""
    found = [name for name, _, secret in SECRETS if secret in text]
    return found + (["payload password"] if PAYLOAD_PASSWORD in text else [])


def store_text(db_file: Path) -> str:
    """Every row of every table of a SQLite store, as text."""
    with sqlite3.connect(db_file) as conn:
        tables = [r[0] for r in conn.execute("select name from sqlite_master where type = 'table'")]
        return "\n".join(repr(row) for t in tables for row in conn.execute(f'select * from "{t}"'))


def assert_real_values_used(steps: list[dict[str, Any]]) -> None:
    assert [s["status"] for s in steps] == ["success", "success"], steps
    assert f"is {len(PAYLOAD_PASSWORD)}." in json.dumps(steps[1]["result"]), steps[1]  # not len("[REDACTED]")
    assert REDACTED in json.dumps(steps[0]["result"])


# -- the redaction itself ------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "text", "secret"), SECRETS, ids=[row[0] for row in SECRETS])
def test_each_secret_is_masked_in_a_result(name: str, text: str, secret: str) -> None:
    result = {"content": [{"type": "text", "text": f"Echo: {text}"}], "structuredContent": {"echo": text}}
    assert secret not in json.dumps(redact(result))


def test_remembered_values_are_masked_only_where_remembered() -> None:
    import contextvars

    def inside() -> tuple[Any, Any]:
        remember_secrets({"payload": {"api_password": "hunter2-x"}, "note": "not-a-secret"})
        return redact({"text": "Echo: hunter2-x not-a-secret"}), redact("hunter2-x")

    masked, bare = contextvars.copy_context().run(inside)
    assert masked == {"text": f"Echo: {REDACTED} not-a-secret"} and bare == REDACTED
    assert redact("hunter2-x") == "hunter2-x"  # another context never saw it


# -- through the API ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[User, LiveServer, Path]]:
    work = tmp_path_factory.mktemp("redaction_api")
    db_file = work / "api.db"
    users = provision(f"sqlite+aiosqlite:///{db_file}", [("ann", "admin", "enterprise")])
    with live_server(work, {"everything": EVERYTHING}, db=f"sqlite+aiosqlite:///{db_file}") as srv:
        yield users["ann"], srv, db_file


def test_api_build_stores_and_shows_no_secret(api: tuple[User, LiveServer, Path]) -> None:
    ann, srv, db_file = api
    with srv.client(ann) as client:
        assert client.put("/api/agents/demo/leaky", json=agent_body(DEFINITION)).status_code == 200
        built = client.post("/api/agents/demo/leaky/build", json={"payload": PAYLOAD})
        assert built.status_code == 200, built.text[:500]
        run = built.json()["run"]
        assert_real_values_used(run["steps"])
        answers = {
            "build": built.text,
            "run": client.get(f"/api/runs/{run['id']}").text,
            "deliverable": client.get(f"/api/deliverables/{run['id']}").text,
            "history": client.get("/api/tools/history", params={"allUsers": "true"}).text,
        }
        executions = client.get("/api/tools/history", params={"allUsers": "true"}).json()["executions"]
        answers.update({e["id"]: client.get(f"/api/tools/executions/{e['id']}").text for e in executions})
    assert run["payload"]["password"] == REDACTED
    assert {name: leaks(text) for name, text in answers.items() if leaks(text)} == {}
    assert leaks(store_text(db_file)) == []
    assert leaks(srv.server_log()) == []


def test_api_execute_answers_and_stores_no_echoed_secret(api: tuple[User, LiveServer, Path]) -> None:
    ann, srv, db_file = api
    with srv.client(ann) as client:
        done = client.post("/api/tools/execute", json={"name": "everything/echo", "arguments": {"message": MESSAGE}})
        assert done.status_code == 200, done.text[:500]
        execution_id = done.json()["executionId"]
        status = client.get(f"/api/tools/executions/{execution_id}").text
        trpc = client.post(
            "/trpc/tools.executeTool", json={"name": "everything/echo", "arguments": {"message": MESSAGE}}
        )
        assert trpc.status_code == 200, trpc.text[:500]
    # The direct answers are masked as the stored record is.
    assert {"rest": leaks(done.text), "trpc": leaks(trpc.text), "status": leaks(status)} == {
        "rest": [],
        "trpc": [],
        "status": [],
    }
    assert leaks(store_text(db_file)) == []


# -- through the CLI ---------------------------------------------------------------------------------------


def test_cli_build_stores_and_prints_no_secret(tmp_path: Path, node_bin: Path) -> None:
    servers = tmp_path / "mcp.json"
    servers.write_text(json.dumps({"mcpServers": {"everything": EVERYTHING}}))
    agent = tmp_path / "leaky.yaml"
    agent.write_text(yaml.safe_dump(DEFINITION))
    payload = tmp_path / "payload.json"
    payload.write_text(json.dumps(PAYLOAD))
    db_file = tmp_path / "cli.db"
    result = CliRunner().invoke(
        app,
        [
            "--db",
            f"sqlite+aiosqlite:///{db_file}",
            "--servers",
            str(servers),
            "--json",
            "build",
            str(agent),
            "-p",
            f"@{payload}",
        ],
    )
    assert result.exit_code == 0, result.output[-2000:]
    assert leaks(result.stdout) == [] and leaks(result.stderr) == []
    with sqlite3.connect(db_file) as conn:
        run_id = conn.execute("select id from runs").fetchone()[0]
        steps = [
            {"status": s, "result": json.loads(r)}
            for s, r in conn.execute(
                "select status, result from run_steps where run_id = ? order by position", (run_id,)
            )
        ]
        stored_payload = json.loads(conn.execute("select payload from runs").fetchone()[0])
    assert_real_values_used(steps)
    assert stored_payload == {"message": stored_payload["message"], "password": REDACTED}
    assert leaks(store_text(db_file)) == []
