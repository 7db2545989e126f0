"""The SQL guard layer: the agent's security block decides, before anything is sent."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolagent.agents.models import Security
from toolagent.errors import SqlRejected
from toolagent.model.status import CallStatus

from ._stack import rig

pytestmark = pytest.mark.anyio


async def test_sql_outside_the_agents_security_block_is_rejected_unsent(tmp_path: Path) -> None:
    security = Security(denied_operations=["DELETE"], allowed_tables=["orders"])
    async with rig(tmp_path) as r:
        r.stub.add("db/execute-sql", lambda a: {"rows": []}, takes_sql=True)
        rejected = await r.call("db/execute-sql", {"sql": "DELETE FROM orders"}, security=security)
        other_table = await r.call("db/execute-sql", {"sql": "SELECT * FROM users LIMIT 5"}, security=security)
        allowed = await r.call("db/execute-sql", {"sql": "SELECT id FROM orders LIMIT 5"}, security=security)
        direct = await r.call("db/execute-sql", {"sql": "DELETE FROM orders"})  # no agent: no block to apply
    assert rejected.status is CallStatus.FAILED and isinstance(rejected.exception, SqlRejected)
    assert (rejected.error or "").startswith("SQL rejected:")
    assert other_table.status is CallStatus.FAILED and "users" in (other_table.error or "")
    assert allowed.status is CallStatus.OK and direct.status is CallStatus.OK
    assert [c[1]["sql"] for c in r.stub.calls] == ["SELECT id FROM orders LIMIT 5", "DELETE FROM orders"]
