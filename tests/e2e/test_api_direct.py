"""The tool call's direct answer (`api/direct.py`) says exactly what FastAPI's routes say.

Two apps on one store, in process: one as served, one with `DirectExecute` taken out. Each request
goes to both; statuses, bodies (less the ids and times of each call) and header names must be
equal. The served app must answer the common cases itself (FastAPI's caller dependency and
tRPC's input parsing never run) and hand the rest to FastAPI."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from _support.api_harness import probe_servers, provision
from fastapi import FastAPI, Request

from toolagent.api import trpc
from toolagent.api.app import create_app
from toolagent.api.auth import current_caller
from toolagent.api.direct import DirectExecute
from toolagent.mcp.config import ServersConfig

pytestmark = pytest.mark.timeout(120)

#: Fields that differ between two calls of the same request.
VOLATILE = {"executionId", "timestamp", "executionTime", "executionTimeMs", "links"}

ECHO = {"name": "probe/echo", "arguments": {"text": "hi"}}
ECHO_BYTES = b'{"name": "probe/echo", "arguments": {"text": "hi"}}'
#: (label, headers beyond the user's key or None for no key, body as JSON or raw bytes, answered directly).
REST_CASES: list[tuple[str, dict[str, str] | None, Any, bool]] = [
    ("success", {}, ECHO, True),
    ("the tool fails", {}, {"name": "probe/fail", "arguments": {}}, True),
    ("unknown tool", {}, {"name": "probe/nope", "arguments": {}}, True),
    ("arguments break the schema", {}, {"name": "probe/echo", "arguments": {"text": 5}}, True),
    ("a permission refusal", {"as": "viewer"}, ECHO, True),
    ("async", {}, {**ECHO, "async": True}, True),
    ("timeout out of range", {}, {**ECHO, "timeout": 5}, False),
    ("an unknown field", {}, {**ECHO, "colour": "red"}, False),
    ("not an object", {}, [ECHO], False),
    ("no key", None, ECHO, False),
    ("an unknown key", {"Authorization": "Bearer ta_nope"}, ECHO, False),
    # The edge checks parse these bodies as JSON; FastAPI's routes do not.
    ("sent without a content type", {}, ECHO_BYTES, False),
    ("sent as text/json", {"Content-Type": "text/json"}, ECHO_BYTES, False),
    ("sent as application/problem+json", {"Content-Type": "application/problem+json"}, ECHO_BYTES, True),
]
TRPC_CASES: list[tuple[str, dict[str, str] | None, Any]] = [
    ("success", {}, ECHO),
    ("the tool fails", {}, {"name": "probe/fail", "arguments": {}}),
    ("invalid input", {}, {**ECHO, "timeout": 5}),
    ("an unknown key", {"Authorization": "Bearer ta_nope"}, ECHO),
]


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _answer(response: httpx.Response) -> tuple[int, Any, set[str]]:
    headers = {k.lower() for k in response.headers if k.lower() not in ("content-length", "date")}
    return response.status_code, _stable(response.json()), headers


def _without_direct(app: FastAPI) -> FastAPI:
    app.user_middleware = [m for m in app.user_middleware if m.cls is not DirectExecute]
    return app


def test_direct_answers_equal_fastapi_answers(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    users = provision(db_url, [("ann", "execute_basic", "enterprise"), ("viewer", "view_only", "enterprise")])
    servers = ServersConfig.from_data({"mcpServers": probe_servers()})
    served, plain = create_app(db=db_url, servers=servers), _without_direct(create_app(db=db_url, servers=servers))

    through_fastapi = {"rest": 0, "trpc": 0}

    async def counted_caller(request: Request) -> Any:
        through_fastapi["rest"] += 1
        return await current_caller(request)

    served.dependency_overrides[current_caller] = counted_caller
    inputs = trpc._inputs

    def counted_inputs(*args: Any, **kwargs: Any) -> list[Any]:
        through_fastapi["trpc"] += 1
        return inputs(*args, **kwargs)

    monkeypatch.setattr(trpc, "_inputs", counted_inputs)

    def request_of(headers: dict[str, str] | None, body: Any) -> dict[str, Any]:
        sent = dict(headers or {})
        user = users[sent.pop("as", "ann")]
        if headers is not None and "Authorization" not in sent:
            sent.update(user.auth)
        if isinstance(body, bytes):
            return {"headers": sent, "content": body}
        return {"headers": sent, "json": body}

    async def main() -> None:
        async with served.router.lifespan_context(served), plain.router.lifespan_context(plain):
            clients = [
                httpx.AsyncClient(transport=httpx.ASGITransport(app=a), base_url="http://api") for a in (served, plain)
            ]

            async def both(path: str, **request: Any) -> tuple[Any, Any]:
                direct = await clients[0].post(path, **request)
                counting = dict(through_fastapi)
                fastapi = await clients[1].post(path, **request)
                through_fastapi.update(counting)  # only the served app's count
                return _answer(direct), _answer(fastapi)

            def expect_route(kind: str, direct: bool, label: str, before: int) -> None:
                went = through_fastapi[kind] - before
                assert went == (0 if direct else 1), f"{kind} {label}: FastAPI ran {went} times"

            for label, headers, body, direct in REST_CASES:
                before = through_fastapi["rest"]
                ours, theirs = await both("/api/tools/execute", **request_of(headers, body))
                assert ours == theirs, label
                expect_route("rest", direct, label, before)
            for label, headers, body in TRPC_CASES:
                before = through_fastapi["trpc"]
                ours, theirs = await both("/trpc/tools.executeTool", **request_of(headers, body))
                assert ours == theirs, label
                expect_route("trpc", True, label, before)
            before = through_fastapi["trpc"]
            batch = request_of({}, {"0": ECHO})
            ours, theirs = await both("/trpc/tools.executeTool?batch=1", **batch)
            assert ours == theirs and ours[0] == 200
            expect_route("trpc", False, "a batch", before)
            # The answers were not all alike: the cases reach what they name.
            statuses = {
                label: (await clients[0].post("/api/tools/execute", **request_of(h, b))).status_code
                for label, h, b, _ in REST_CASES
                if label in ("success", "a permission refusal", "async", "no key")
            }
            assert statuses == {"success": 200, "a permission refusal": 403, "async": 202, "no key": 401}
            for client in clients:
                await client.aclose()

    anyio.run(main)


def test_direct_answers_are_counted_under_their_route(tmp_path: Path) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'api.db'}"
    users = provision(db, [("ann", "execute_basic", "enterprise")])
    app = create_app(db=db, servers=ServersConfig.from_data({"mcpServers": probe_servers()}))
    labels: Callable[[str], str] = lambda text: "\n".join(  # noqa: E731
        line for line in text.splitlines() if line.startswith('http_requests_total{method="POST"')
    )

    async def main() -> None:
        async with app.router.lifespan_context(app):
            async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://api", headers=users["ann"].auth
            ) as client:
                assert (await client.post("/api/tools/execute", json=ECHO)).status_code == 200
                assert (await client.post("/trpc/tools.executeTool", json=ECHO)).status_code == 200
                text = (await client.get("/metrics")).text
        counted = labels(text)
        assert 'route="/api/tools/execute",status="200"} 1.0' in counted, counted
        assert 'route="/trpc/{path:path}",status="200"} 1.0' in counted, counted

    anyio.run(main)
