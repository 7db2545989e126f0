"""`toolagent orgs` and the audited agent writes of the CLI, as subprocesses on SQLite and PostgreSQL:
seeding starts `demo` with no members, roles are granted, listed and revoked with the documented
exit codes, and every change is an audit row under `--user` in a chain `audit verify` accepts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _support.repo import REPO_ROOT

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

TOOLAGENT = Path(sys.executable).parent / "toolagent"
SEED = str(REPO_ROOT / "seeds" / "demo_supabase_agent.json")


def cli(db: str, *args: str, user: str = "ops") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TERM": "dumb", "COLUMNS": "200"}
    env.pop("TOOLAGENT_AUDIT_KEY", None)
    return subprocess.run(
        [str(TOOLAGENT), "--db", db, "--user", user, *args], capture_output=True, text=True, timeout=120, env=env
    )


def as_json(db: str, *args: str, user: str = "ops") -> Any:
    done = cli(db, "--json", *args, user=user)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_orgs_commands_and_audited_agent_writes(db_url: str, tmp_path: Path) -> None:
    assert cli(db_url, "seed", SEED, user="seeder").returncode == 0
    assert cli(db_url, "users", "add", "eddie", "--level", "execute_basic").returncode == 0

    [demo] = as_json(db_url, "orgs", "list")
    assert (demo["slug"], demo["members"], demo["admins"], demo["agents"], demo["createdBy"]) == (
        "demo",
        0,
        0,
        1,
        "seeder",
    )
    empty = cli(db_url, "orgs", "members", "demo")
    assert empty.returncode == 0 and "only global admins" in empty.stdout and "orgs grant demo USER" in empty.stdout

    granted = cli(db_url, "orgs", "grant", "demo", "eddie", "--role", "editor")
    assert granted.returncode == 0 and "granted: eddie is editor of demo" in granted.stdout, granted.stderr
    assert as_json(db_url, "orgs", "grant", "demo", "eddie", "--role", "admin")["outcome"] == "changed"
    members = as_json(db_url, "orgs", "members", "demo")
    assert [(m["user"], m["role"], m["grantedBy"]) for m in members] == [("eddie", "admin", "ops")]
    table = cli(db_url, "orgs", "list")
    assert table.returncode == 0 and "demo" in table.stdout

    # Usage errors exit 2 with one line naming the fix; a missing user or membership exits 1.
    for args, code, needle in [
        (("orgs", "grant", "demo", "eddie", "--role", "owner"), 2, "use one of viewer, editor, admin"),
        (("orgs", "grant", "Demo2", "eddie", "--role", "editor"), 2, "lower-case letters"),
        (("orgs", "grant", "demo", "nobody", "--role", "editor"), 1, "toolagent users add nobody"),
        (("orgs", "revoke", "demo", "nobody"), 1, "user 'nobody' not found"),
        (("orgs", "members", "nowhere"), 1, "organization 'nowhere' not found"),
        (("orgs", "grant", "demo", "eddie"), 2, "--role"),
    ]:
        done = cli(db_url, *args)
        assert done.returncode == code, (args, done.stdout, done.stderr)
        assert needle in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)

    # The operator starts an organization by granting its first role.
    assert as_json(db_url, "orgs", "grant", "acme", "eddie", "--role", "viewer")["outcome"] == "granted"
    revoked = cli(db_url, "orgs", "revoke", "acme", "eddie")
    assert revoked.returncode == 0 and "no longer viewer of acme" in revoked.stdout
    again = cli(db_url, "orgs", "revoke", "acme", "eddie")
    assert again.returncode == 1 and "has no role in organization 'acme'" in again.stderr

    # `agents upsert` is audited with its diff, under --user.
    definition = json.loads(json.loads(Path(SEED).read_text())["yaml"])
    configuration = {k: v for k, v in definition["configuration"].items() if k != "security"}
    changed = tmp_path / "supabase-agent.yaml"
    changed.write_text(json.dumps({**definition, "configuration": configuration}))
    upserted = cli(db_url, "agents", "upsert", str(changed), user="operator-olga")
    assert upserted.returncode == 0 and "updated" in upserted.stdout, upserted.stderr

    rows = as_json(db_url, "audit", "list", "-n", "100")
    changes = [(r["event"], r["principal"], r["decision"], r["arguments"]["via"]) for r in rows]
    assert changes == [
        ("org.create", "seeder", "allow", "cli"),
        ("agent.create", "seeder", "allow", "cli"),
        ("org.grant", "ops", "allow", "cli"),
        ("org.grant", "ops", "allow", "cli"),
        ("org.create", "ops", "allow", "cli"),
        ("org.grant", "ops", "allow", "cli"),
        ("org.revoke", "ops", "allow", "cli"),
        ("agent.update", "operator-olga", "allow", "cli"),
    ]
    paths = {d["path"] for d in rows[-1]["arguments"]["diff"]}
    assert {"yaml.configuration.security.allowed_tables", "yaml.configuration.security.denied_operations"} <= paths
    verified = cli(db_url, "audit", "verify")
    assert verified.returncode == 0 and verified.stdout.startswith("ok: 8 rows"), verified.stdout + verified.stderr
