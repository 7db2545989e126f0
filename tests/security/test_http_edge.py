"""Attacks on the HTTP edge: oversized bodies, malformed inputs, and BUILD overrides from a caller
who may not run the agent's tools. Each table row is one attack; add a line to add an attack."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from _support.api_harness import LiveServer, User, agent_body, live_server, probe_servers, provision

from toolagent.api.body_limit import DEFAULT_MAX_BODY_BYTES, MAX_BODY_ENV, max_body_bytes_of
from toolagent.errors import ConfigError
from toolagent.settings import Settings

pytestmark = pytest.mark.timeout(180)

USERS = [("ann", "admin", "enterprise"), ("viewer", "view_only", "enterprise")]
ENGINE_CONFIG = {"plans": {"enterprise": {"rate_per_minute": 100_000}}}
#: A small cap for the live server, so oversized bodies stay cheap to send.
CAP = 64 * 1024
ECHO = {
    "metadata": {"name": "echo", "version": "1.0.0", "type": "tool"},
    "configuration": {"tools": ["probe/echo"], "toolParams": {"probe/echo": {"text": "{{payload.text}}"}}},
}
#: Renders for many seconds on today's sandbox (a 300000-fold string wrapped one character a line).
SLOW_TEMPLATE = "{{ (payload.x * 300000)|wordwrap(1)|length }}"


@contextlib.contextmanager
def edge_server(tmp_path: Path, db: str) -> Iterator[tuple[dict[str, User], LiveServer]]:
    users = provision(db, USERS)
    with live_server(
        tmp_path, probe_servers(), engine_config=ENGINE_CONFIG, db=db, env={MAX_BODY_ENV: str(CAP)}
    ) as srv:
        with srv.client(users["ann"]) as ann:
            assert ann.put("/api/agents/demo/echo", json=agent_body(ECHO)).status_code == 200
        yield users, srv


@pytest.fixture(scope="module")
def sqlite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, User], LiveServer]]:
    work = tmp_path_factory.mktemp("edge")
    with edge_server(work, f"sqlite+aiosqlite:///{work / 'api.db'}") as pair:
        yield pair


# -- request body size ---------------------------------------------------------------------------

#: (name, request head, body bytes actually sent) — the body sent is a fraction of what is declared.
OVERSIZED = [
    (
        "declared 30 MB",
        "POST /api/agents/demo/echo/build HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 31457280\r\n",
        b'{"payload": {"x": "' + b"a" * 60_000,
    ),
    ("declared over the cap, unauthenticated", "PUT /api/agents/demo/x HTTP/1.1\r\nContent-Length: 65537\r\n", b"{"),
    ("declared over the cap, tRPC", "POST /trpc/tools.executeTool HTTP/1.1\r\nContent-Length: 9999999\r\n", b"{"),
]
#: (name, chunks of a chunked body that pass the cap; the body never ends)
CHUNKED = [
    ("chunked past the cap", [b'{"payload": {"x": "', b"a" * 40_000, b"a" * 40_000]),
]


def _raw(srv: LiveServer, data: bytes, key: str) -> tuple[int, dict[str, str], bytes]:
    """Send `data` on a fresh socket, never finishing the body, and read the answer."""
    host, port = srv.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(data.replace(b"\r\n", f"\r\nHost: x\r\nAuthorization: Bearer {key}\r\n".encode(), 1))
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < _length(answer):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def _length(answer: bytes) -> int:
    for line in answer.partition(b"\r\n\r\n")[0].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":")[1])
    return 1 << 30


def _assert_too_large(status: int, body: bytes) -> None:
    assert status == 413, body[:300]
    error = json.loads(body)["error"]
    assert error["code"] == "PAYLOAD_TOO_LARGE"
    assert str(CAP) in error["message"] and MAX_BODY_ENV in error["message"], error
    assert error["details"] == {"limitBytes": CAP, "setting": MAX_BODY_ENV}
    assert len(body) < 1000  # nothing of the body is echoed back


@pytest.mark.parametrize(("name", "head", "sent"), OVERSIZED, ids=[row[0] for row in OVERSIZED])
def test_declared_oversized_body_is_413_before_it_is_read(
    sqlite_server: tuple[dict[str, User], LiveServer], name: str, head: str, sent: bytes
) -> None:
    users, srv = sqlite_server
    # Only part of the declared body is ever sent: an answer proves the server did not wait for the rest.
    status, _, body = _raw(srv, head.encode() + b"\r\n" + sent, users["ann"].key)
    _assert_too_large(status, body)
    assert httpx.get(f"{srv.url}/health").status_code == 200


@pytest.mark.parametrize(("name", "chunks"), CHUNKED, ids=[row[0] for row in CHUNKED])
def test_chunked_body_is_413_once_past_the_cap(
    sqlite_server: tuple[dict[str, User], LiveServer], name: str, chunks: list[bytes]
) -> None:
    users, srv = sqlite_server
    head = b"POST /api/agents/demo/echo/build HTTP/1.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    body = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks)  # no final 0-chunk: the body never ends
    status, _, answer = _raw(srv, head + body, users["ann"].key)
    _assert_too_large(status, answer)


def test_body_within_the_cap_passes(sqlite_server: tuple[dict[str, User], LiveServer]) -> None:
    users, srv = sqlite_server
    with srv.client(users["ann"]) as ann:
        response = ann.post("/api/agents/demo/echo/build", json={"payload": {"text": "a" * (CAP - 100)}})
    assert response.status_code == 200, response.text[:300]


def test_body_cap_setting() -> None:
    assert max_body_bytes_of(Settings.from_env({})) == DEFAULT_MAX_BODY_BYTES == 1024 * 1024
    assert max_body_bytes_of(Settings.from_env({MAX_BODY_ENV: "2048"})) == 2048
    for bad in ("0", "-1", "1MB"):
        with pytest.raises(ConfigError, match=MAX_BODY_ENV):
            max_body_bytes_of(Settings.from_env({MAX_BODY_ENV: bad}))


# -- BUILD gate before rendering -------------------------------------------------------------------

#: Overrides a `view_only` key sends; each must be refused before it is parsed or rendered.
VIEWER_OVERRIDES = [
    ("slow render", {"payload": {"x": "ab"}, "toolParams": {"probe/echo": {"text": SLOW_TEMPLATE}}}),
    ("template that does not parse", {"toolParams": {"probe/echo": {"text": "{{ payload.x "}}}),
    ("unknown template variable", {"toolParams": {"probe/echo": {"text": "{{ nothing.here }}"}}}),
]


@pytest.mark.parametrize(("name", "body"), VIEWER_OVERRIDES, ids=[row[0] for row in VIEWER_OVERRIDES])
def test_view_only_build_is_403_before_overrides_are_touched(
    sqlite_server: tuple[dict[str, User], LiveServer], name: str, body: dict[str, Any]
) -> None:
    users, srv = sqlite_server
    with srv.client(users["viewer"]) as viewer:
        response = viewer.post("/api/agents/demo/echo/build", json=body)
        assert response.status_code == 403, response.text[:300]
        error = response.json()["error"]
        assert error["code"] == "FORBIDDEN" and "view_only" in error["message"], error
        # Nothing ran or was recorded on the viewer's behalf.
        history = viewer.get("/api/tools/history").json()
        assert history["totalCount"] == 0, history


#: ECHO with a filter in its template: bare references render on the event loop (a copy), anything
#: else in a worker thread, which is what this test holds.
ECHO_FILTERED = {
    "metadata": {"name": "echo", "version": "1.0.0", "type": "tool"},
    "configuration": {"tools": ["probe/echo"], "toolParams": {"probe/echo": {"text": "{{payload.text|trim}}"}}},
}


def test_health_answers_while_a_build_renders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A render that holds its thread until /health has answered: on the event loop it could not."""
    from toolagent.api.app import create_app
    from toolagent.interpolation import ParamsTemplate
    from toolagent.mcp.config import ServersConfig

    db = f"sqlite+aiosqlite:///{tmp_path / 'api.db'}"
    users = provision(db, USERS)
    config_file = tmp_path / "engine.json"
    config_file.write_text(json.dumps(ENGINE_CONFIG))
    monkeypatch.setenv("TOOLAGENT_ENGINE_CONFIG", str(config_file))
    order: list[str] = []
    started, release = threading.Event(), threading.Event()
    render = ParamsTemplate.render

    def slow_render(self: ParamsTemplate, context: Any) -> Any:
        out = render(self, context)
        if context.get("payload", {}).get("slow"):
            order.append("render started")
            started.set()
            order.append("render ended" if release.wait(15) else "render gave up")
        return out

    monkeypatch.setattr(ParamsTemplate, "render", slow_render)
    app = create_app(db=db, servers=ServersConfig.from_data({"mcpServers": probe_servers()}))

    async def main() -> None:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://api", headers=users["ann"].auth, timeout=60
            ) as client:
                answers: dict[str, httpx.Response] = {}

                async def build() -> None:
                    answers["build"] = await client.post(
                        "/api/agents/demo/echo/build", json={"payload": {"text": "hi", "slow": True}}
                    )

                assert (await client.put("/api/agents/demo/echo", json=agent_body(ECHO_FILTERED))).status_code == 200
                async with anyio.create_task_group() as tg:
                    tg.start_soon(build)
                    with anyio.fail_after(30):
                        await anyio.to_thread.run_sync(started.wait)
                    health = await client.get("/health")
                    order.append("health answered")
                    release.set()
                assert health.status_code == 200
                assert answers["build"].status_code == 200, answers["build"].text[:300]

    anyio.run(main)
    assert order == ["render started", "health answered", "render ended"]


# -- malformed inputs: 400 naming the field, on both databases ----------------------------------------

NUL = "a\x00b"
#: (name, method, path, JSON body or raw bytes or None, expected field)
MALFORMED: list[tuple[str, str, str, Any, str]] = [
    ("NUL in a run id", "GET", "/api/runs/run_%00x", None, "path"),
    ("NUL in a run id, events", "GET", "/api/runs/run_%00x/events", None, "path"),
    ("NUL in a run id, cancel", "POST", "/api/runs/run_%00x/cancel", None, "path"),
    ("NUL in a deliverable id", "GET", "/api/deliverables/dlv_%00x", None, "path"),
    ("NUL in an organization", "GET", "/api/agents/de%00mo/echo", None, "path"),
    ("NUL in an organization, PUT", "PUT", "/api/agents/de%00mo/echo", agent_body(ECHO), "path"),
    ("NUL in an execution id", "GET", "/api/tools/executions/exec_%00", None, "path"),
    ("NUL in an execution id, cancel", "POST", "/api/tools/executions/exec_%00/cancel", None, "path"),
    ("NUL in a tool name", "GET", "/api/tools/pro%00be/echo", None, "path"),
    ("NUL in a query parameter", "GET", "/api/agents?org=a%00b", None, "query.org"),
    ("NUL in history toolName", "GET", "/api/tools/history?toolName=a%00b", None, "query.toolName"),
    ("NUL in history userId", "GET", "/api/tools/history?userId=a%00b&allUsers=true", None, "query.userId"),
    (
        "NUL in a tool argument",
        "POST",
        "/api/tools/execute",
        {"name": "probe/echo", "arguments": {"text": NUL}},
        "arguments.text",
    ),
    (
        "NUL in an argument key",
        "POST",
        "/api/tools/execute",
        {"name": "probe/echo", "arguments": {NUL: "x"}},
        "arguments",
    ),
    (
        "NUL in a session id",
        "POST",
        "/api/tools/execute",
        {"name": "probe/echo", "arguments": {"text": "x"}, "context": {"sessionId": NUL}},
        "context.sessionId",
    ),
    (
        "NUL in metadata",
        "POST",
        "/api/tools/execute",
        {"name": "probe/echo", "arguments": {"text": "x"}, "context": {"metadata": {"k": NUL}}},
        "context.metadata.k",
    ),
    ("NUL in a payload", "POST", "/api/agents/demo/echo/build", {"payload": {"text": NUL}}, "payload.text"),
    (
        "NUL in an override",
        "POST",
        "/api/agents/demo/echo/build",
        {"toolParams": {"probe/echo": {"text": NUL}}},
        "toolParams.probe/echo.text",
    ),
    ("NUL in an agent field", "PUT", "/api/agents/demo/nul", agent_body(ECHO, description=NUL), "description"),
    (
        "NUL inside an agent definition",
        "PUT",
        "/api/agents/demo/nuldef",
        agent_body({**ECHO, "metadata": {**ECHO["metadata"], "name": NUL}}, display_name="nuldef"),
        "yaml.metadata.name",
    ),
    (
        "lone surrogate in a payload",
        "POST",
        "/api/agents/demo/echo/build",
        b'{"payload": {"text": "\\ud800"}}',
        "payload.text",
    ),
    (
        "lone surrogate in an argument",
        "POST",
        "/api/tools/execute",
        b'{"name": "probe/echo", "arguments": {"text": "\\udfff"}}',
        "arguments.text",
    ),
    (
        "lone surrogate in an agent field",
        "PUT",
        "/api/agents/demo/sur",
        json.dumps(agent_body(ECHO, description="\ud800")).encode(),
        "description",
    ),
    ("not JSON", "POST", "/api/agents/demo/echo/build", b'{"payload": {"text": "x"', "body"),
    ("not UTF-8", "POST", "/api/agents/demo/echo/build", b"\xff\xfe", "body"),
    ("NaN", "POST", "/api/agents/demo/echo/build", b'{"payload": {"n": NaN}}', "body"),
    ("number past a double", "POST", "/api/agents/demo/echo/build", b'{"payload": {"n": 1e999}}', "payload.n"),
    (
        "integer of 5000 digits",
        "POST",
        "/api/agents/demo/echo/build",
        b'{"payload": {"n": 1' + b"0" * 5000 + b"}}",
        "body",
    ),
    (
        "integer past 64 bits",
        "POST",
        "/api/tools/execute",
        b'{"name": "probe/echo", "arguments": {"text": 123456789012345678901234567890}}',
        "arguments.text",
    ),
    (
        "deeply nested arrays",
        "POST",
        "/api/tools/execute",
        b'{"name": "probe/echo", "arguments": {"a": ' + b"[" * 20_000 + b"]" * 20_000 + b"}}",
        "body",
    ),
    (
        "deeply nested objects",
        "POST",
        "/api/agents/demo/echo/build",
        b'{"payload": ' + b'{"a":' * 200 + b"1" + b"}" * 200 + b"}",
        "payload.a.a.a.a",
    ),
    (
        "tRPC: deeply nested input",
        "POST",
        "/trpc/tools.executeTool",
        b'{"name": "probe/echo", "arguments": ' + b"[" * 20_000 + b"]" * 20_000 + b"}",
        "body",
    ),
    (
        "tRPC: lone surrogate",
        "POST",
        "/trpc/tools.executeTool",
        b'{"name": "probe/echo", "arguments": {"text": "\\ud800"}}',
        "arguments.text",
    ),
    (
        "tRPC: NUL in a GET input",
        "GET",
        "/trpc/tools.getToolStatus?input=%7B%22executionId%22%3A%22a%5Cu0000b%22%7D",
        None,
        "input.executionId",
    ),
    ("tRPC: not JSON in a GET input", "GET", "/trpc/tools.getToolHistory?input=%ff", None, "input"),
]


def _fields(response: httpx.Response) -> list[str]:
    body = response.json()
    if not isinstance(body, dict) or not isinstance(body.get("error"), dict):
        return []
    if "success" in body:
        return [d["field"] for d in body["error"].get("details") or []] or [body["error"]["message"]]
    return [body["error"]["message"]]  # tRPC shape: the message starts with the field


def test_malformed_inputs_are_400_naming_the_field(db_url: str, tmp_path: Path) -> None:
    wrong = []
    with edge_server(tmp_path, db_url) as (users, srv), srv.client(users["ann"]) as client:
        streams: list[Any] = []
        for name, method, path, body, field in MALFORMED:
            if isinstance(body, bytes):
                response = client.request(method, path, content=body, headers={"Content-Type": "application/json"})
            else:
                response = client.request(method, path, json=body)
            streams.append(response.extensions.get("network_stream"))
            named = _fields(response)
            if response.status_code != 400 or not any(
                f == field or f.startswith((f"{field}:", f"{field}.")) for f in named
            ):
                wrong.append(f"{name}: {response.status_code} {response.text[:200]}")
            assert response.headers.get("connection") != "close", name
        # Every answer came back on the one keep-alive connection.
        assert streams[0] is not None and all(s is streams[0] for s in streams)
        assert client.get("/health").status_code == 200
    assert not wrong, "\n".join(wrong)
