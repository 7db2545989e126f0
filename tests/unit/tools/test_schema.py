"""The schema layer: arguments are checked against the input schema once, naming each bad field."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolagent.errors import ArgumentsInvalid
from toolagent.model.status import CallStatus

from ._stack import rig

pytestmark = pytest.mark.anyio

SCHEMA = {"type": "object", "properties": {"max_rows": {"type": "integer"}}, "required": ["max_rows"]}


async def test_arguments_that_break_the_schema_never_reach_the_tool(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        r.stub.add("db/read", lambda a: "x", input_schema=SCHEMA)
        bad = await r.call("db/read", {"max_rows": "ten"})
        good = await r.call("db/read", {"max_rows": 10})
    assert bad.status is CallStatus.FAILED and isinstance(bad.exception, ArgumentsInvalid)
    assert "`max_rows`: 'ten' is not of type 'integer'" in (bad.error or "")
    assert good.status is CallStatus.OK and r.stub.calls == [("db/read", {"max_rows": 10})]


async def test_the_schema_is_checked_once_per_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import toolagent.tools.schema as layer

    seen: list[str] = []
    real = layer.check_arguments
    monkeypatch.setattr(layer, "check_arguments", lambda spec, args: (seen.append(spec.name), real(spec, args))[1])
    async with rig(tmp_path) as r:
        r.stub.add("db/read", lambda a: "x", input_schema=SCHEMA)
        await r.call("db/read", {"max_rows": 1})
    assert seen == ["db/read"]
