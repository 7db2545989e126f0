"""GET /metrics over a live server: the engine's figures and the HTTP request counts, parsed with
prometheus_client's own parser after known executions; and the TOOLAGENT_METRICS_AUTH modes."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from _support.api_harness import LiveServer, User, agent_body, live_server, probe_servers, provision
from prometheus_client.parser import text_string_to_metric_families

from toolagent.api.app import create_app
from toolagent.errors import ConfigError
from toolagent.mcp.config import ServersConfig

pytestmark = pytest.mark.timeout(120)

ENGINE_CONFIG = {"plans": {"enterprise": {"rate_per_minute": 100_000}}}
USERS = [("ann", "admin", "enterprise"), ("bob", "execute_basic", "enterprise")]

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(client: httpx.Client) -> tuple[Samples, dict[str, str]]:
    """Every sample of /metrics by (sample name, labels), and each family's type."""
    response = client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    samples: Samples = {}
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(response.text):
        types[family.name] = family.type
        for sample in family.samples:
            key = (sample.name, frozenset(sample.labels.items()))
            assert key not in samples, f"duplicate sample {key}"
            samples[key] = sample.value
    return samples, types


def execute(client: httpx.Client, name: str, **arguments: object) -> httpx.Response:
    return client.post("/api/tools/execute", json={"name": name, "arguments": arguments})


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, dict[str, User]]]:
    """A server on which a known set of executions and requests has happened."""
    work = tmp_path_factory.mktemp("api_metrics")
    db = f"sqlite+aiosqlite:///{work / 'api.db'}"
    users = provision(db, USERS)
    with live_server(work, probe_servers(), engine_config=ENGINE_CONFIG, db=db) as server:
        with server.client(users["bob"]) as bob, server.client(users["ann"]) as ann:
            pair = {
                "metadata": {"name": "pair"},
                "configuration": {
                    "tools": ["probe/echo", "probe/double"],
                    "toolParams": {"probe/echo": {"text": "built"}, "probe/double": {"value": 2}},
                },
            }
            ghostly = {"metadata": {"name": "ghostly"}, "configuration": {"tools": ["probe/echo", "ghost/tool"]}}
            assert bob.put("/api/agents/demo/pair", json=agent_body(pair)).status_code == 200
            assert bob.put("/api/agents/demo/ghostly", json=agent_body(ghostly)).status_code == 200
            for i in range(3):
                assert execute(bob, "probe/echo", text=str(i)).status_code == 200
            assert execute(bob, "probe/fail").status_code == 500
            assert execute(bob, "probe/query", sql="x").status_code == 403
            assert execute(ann, "probe/add", a=1, b=2).status_code == 200
            built = bob.post("/api/agents/demo/pair/build", json={})
            assert built.status_code == 200 and built.json()["run"]["status"] == "success", built.text
            assert bob.get("/nowhere").status_code == 404
        with httpx.Client(base_url=server.url) as anonymous:
            assert anonymous.get("/api/agents").status_code == 401
        yield server, users


def test_metrics_need_no_key_by_default(measured: tuple[LiveServer, dict[str, User]]) -> None:
    server, _ = measured
    with httpx.Client(base_url=server.url) as anonymous:
        response = anonymous.get("/metrics")
    assert response.status_code == 200 and response.text.endswith("\n")
    assert "# TYPE tool_execution_total counter" in response.text


def test_engine_figures(measured: tuple[LiveServer, dict[str, User]]) -> None:
    server, _ = measured
    with httpx.Client(base_url=server.url) as client:
        samples, types = scrape(client)
    assert types["tool_execution"] == "counter" and types["tool_execution_duration_seconds"] == "histogram"
    assert types["tool_executions_active"] == "gauge" and types["tool_discovery_count"] == "gauge"

    # 3 calls + 1 BUILD step of probe/echo; the BUILD's probe/double; ann's probe/add; one failure.
    assert value(samples, "tool_execution_total", tool="probe/echo", category="memory", status="success") == 4
    assert value(samples, "tool_execution_total", tool="probe/double", category="memory", status="success") == 1
    assert value(samples, "tool_execution_total", tool="probe/add", category="agent", status="success") == 1
    assert value(samples, "tool_execution_total", tool="probe/fail", category="agent", status="failed") == 1
    assert value(samples, "tool_execution_total", tool="probe/fail", category="agent", status="success") == 0
    assert value(samples, "tool_execution_total", tool="probe/query", category="agent", status="success") == 0

    assert value(samples, "tool_execution_duration_seconds_count", tool="probe/echo") == 4
    assert value(samples, "tool_execution_duration_seconds_bucket", tool="probe/echo", le="+Inf") == 4
    assert 0 < value(samples, "tool_execution_duration_seconds_sum", tool="probe/echo") < 30
    echo_buckets = sorted(
        (float(dict(labels)["le"]), v)
        for (name, labels), v in samples.items()
        if name == "tool_execution_duration_seconds_bucket" and dict(labels)["tool"] == "probe/echo"
    )
    assert [v for _, v in echo_buckets] == sorted(v for _, v in echo_buckets)  # cumulative

    assert value(samples, "tool_permission_denied_total", tool="probe/query", reason="level") == 1
    assert value(samples, "tool_executions_active") == 0
    assert value(samples, "tool_user_executions_total", user="bob", status="success") == 5
    assert value(samples, "tool_user_executions_total", user="bob", status="failed") == 1
    assert value(samples, "tool_user_executions_total", user="bob", status="denied") == 1
    assert value(samples, "tool_user_executions_total", user="ann", status="success") == 1
    assert value(samples, "tool_discovery_count", agent_id="demo/pair") == 2
    assert value(samples, "tool_discovery_count", agent_id="demo/ghostly") == 1  # ghost/tool is not registered


def test_http_figures(measured: tuple[LiveServer, dict[str, User]]) -> None:
    server, _ = measured
    with httpx.Client(base_url=server.url) as client:
        first, types = scrape(client)
        second, _ = scrape(client)
    assert types["http_requests"] == "counter" and types["http_request_duration_seconds"] == "histogram"
    execute = {"method": "POST", "route": "/api/tools/execute"}
    assert value(first, "http_requests_total", **execute, status="200") == 4
    assert value(first, "http_requests_total", **execute, status="500") == 1
    assert value(first, "http_requests_total", **execute, status="403") == 1
    assert value(first, "http_requests_total", method="PUT", route="/api/agents/{org}/{slug}", status="200") == 2
    assert value(first, "http_requests_total", method="POST", route="/api/agents/{org}/{slug}/build", status="200") == 1
    assert value(first, "http_requests_total", method="GET", route="unmatched", status="404") == 1
    assert value(first, "http_requests_total", method="GET", route="/api/agents", status="401") == 1
    assert value(first, "http_request_duration_seconds_count", **execute) == 6  # every status
    assert value(first, "http_request_duration_seconds_bucket", **execute, le="+Inf") == 6
    assert value(first, "http_request_duration_seconds_sum", **execute) > 0

    # A scrape counts itself once it is answered; counters only grow.
    scrapes = value(first, "http_requests_total", method="GET", route="/metrics", status="200")
    assert value(second, "http_requests_total", method="GET", route="/metrics", status="200") == scrapes + 1
    for key, before in first.items():
        if key[0].endswith(("_total", "_count", "_bucket", "_sum")):
            assert second.get(key, 0) >= before, key


@pytest.fixture(scope="module", params=["key", "admin"])
def guarded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, LiveServer, dict[str, User]]]:
    """A server started with TOOLAGENT_METRICS_AUTH=key or =admin."""
    work = tmp_path_factory.mktemp(f"api_metrics_{request.param}")
    db = f"sqlite+aiosqlite:///{work / 'api.db'}"
    users = provision(db, USERS)
    with live_server(
        work, probe_servers(), engine_config=ENGINE_CONFIG, db=db, env={"TOOLAGENT_METRICS_AUTH": request.param}
    ) as server:
        yield request.param, server, users


def test_metrics_auth_modes(guarded: tuple[str, LiveServer, dict[str, User]]) -> None:
    mode, server, users = guarded
    with httpx.Client(base_url=server.url) as client:
        for headers in ({}, {"Authorization": "Bearer ta_wrong"}):
            response = client.get("/metrics", headers=headers)
            assert response.status_code == 401 and response.json()["error"]["code"] == "UNAUTHORIZED", response.text
        assert client.get("/metrics", headers=users["ann"].auth).status_code == 200
        assert client.get("/metrics", headers={"X-API-Key": users["ann"].key}).status_code == 200
        as_bob = client.get("/metrics", headers=users["bob"].auth)
        if mode == "key":
            assert as_bob.status_code == 200
        else:
            assert as_bob.status_code == 403 and as_bob.json()["error"]["code"] == "FORBIDDEN"
            assert "bob" in as_bob.json()["error"]["message"] and "admin" in as_bob.json()["error"]["message"]
        assert client.get("/health").status_code == 200


@pytest.mark.parametrize("setting", ["everyone", "", "ADMIN"])
def test_metrics_auth_setting_is_checked_at_start(monkeypatch: pytest.MonkeyPatch, setting: str) -> None:
    monkeypatch.setenv("TOOLAGENT_METRICS_AUTH", setting)
    if setting in ("", "ADMIN"):  # unset means the default; case does not matter
        create_app(servers=ServersConfig())
        return
    with pytest.raises(ConfigError, match="TOOLAGENT_METRICS_AUTH='everyone': expected one of none, key, admin"):
        create_app(servers=ServersConfig())
    with pytest.raises(ConfigError, match="metrics_auth='open'"):
        create_app(servers=ServersConfig(), metrics_auth="open")  # type: ignore[arg-type]
