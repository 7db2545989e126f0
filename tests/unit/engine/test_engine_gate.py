"""The 4 levels x 3 risks matrix, API key scopes; risk and category
classification; the engine config. And the same matrix for BUILD steps, through BuildRunner and
the runtime's tool stack over an MCP server running in process."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from _support.factories import LEVEL_MAY_RUN, REQUIRED_LEVELS

from toolagent.engine.config import EngineConfig
from toolagent.engine.permissions import parse_scope
from toolagent.engine.principals import Principal
from toolagent.engine.registry import Registry, category_with_source, classify_category, classify_risk
from toolagent.errors import ConfigError, UsageError
from toolagent.mcp.config import ServersConfig
from toolagent.model.permissions import LEVELS, RISKS, can_run, required_for, scopes_allow
from toolagent.model.spec import ToolSpec
from toolagent.policy import Policy

ALLOWED, REQUIRES = LEVEL_MAY_RUN, REQUIRED_LEVELS


def test_matrix_is_exhaustive() -> None:
    assert set(ALLOWED) == {(lv, rk) for lv in LEVELS for rk in RISKS}
    assert all(can_run(lv, rk) is ok for (lv, rk), ok in ALLOWED.items())
    assert required_for("dangerous") == "admin"


@pytest.mark.parametrize(
    ("scopes", "category", "ok"),
    [
        (("*",), "shell", True),
        (("agent:execute:*",), "shell", True),
        (("agent:execute:shell",), "shell", True),
        (("agent:execute:file",), "shell", False),
        ((), "shell", False),
    ],
)
def test_scopes(scopes: tuple[str, ...], category: str, ok: bool) -> None:
    assert scopes_allow(scopes, category) is ok


@pytest.mark.parametrize("scope", ["agent:execute:nope", "agent:*", "admin", ""])
def test_bad_scopes(scope: str) -> None:
    with pytest.raises(UsageError, match="invalid scope"):
        parse_scope(scope)


def spec(name: str, **kw: object) -> ToolSpec:
    server, _, tool = name.partition("/")
    return ToolSpec(name=name, server=server, tool=tool, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "kw", "risk", "source"),
    [
        ("file/read", {}, "safe", "table"),
        ("web/post", {}, "moderate", "table"),
        ("shell/exec", {}, "dangerous", "table"),
        ("browser/close", {}, "dangerous", "table"),
        ("tools/file_read", {}, "safe", "table"),  # a flat name of the risk table
        ("tools/http_request", {}, "moderate", "table"),
        ("fs/read_file", {"category": "file"}, "safe", "table"),  # category + verb from the table
        ("fs/write_file", {"category": "file"}, "dangerous", "table"),
        ("fs/list_directory", {"category": "file"}, "safe", "table"),
        ("fs/read_then_delete", {"category": "file"}, "dangerous", "table"),  # riskiest verb wins
        ("fs/move_file", {"category": "file"}, "dangerous", "default"),  # not in the table
        ("fs/read_file", {}, "safe", "table"),  # category from the server's name
        ("x/read_file", {}, "dangerous", "default"),  # category from the tool's own name: no verb guessing
        ("x/y", {"annotations": {"read_only_hint": True}}, "dangerous", "default"),  # untrusted hints ignored
        ("x/y", {"annotations": {"read_only_hint": True}, "trusted": True}, "safe", "annotations"),
        ("x/y", {"annotations": {"destructive_hint": False}, "trusted": True}, "moderate", "annotations"),
        ("x/y", {"annotations": {"destructive_hint": True}, "trusted": True}, "dangerous", "annotations"),
        ("x/y", {"annotations": {"title": "Y"}, "trusted": True}, "dangerous", "annotations"),
        ("x/y", {"trusted": True}, "dangerous", "default"),
        ("shell/exec", {"risk": "safe"}, "safe", "operator"),  # the operator wins over the table
    ],
)
def test_risk(name: str, kw: dict[str, object], risk: str, source: str) -> None:
    s = spec(name, **kw)
    category, category_source = category_with_source(s)
    assert classify_risk(s, category, category_source=category_source) == (risk, source)


@pytest.mark.parametrize(
    ("name", "kw", "category"),
    [
        ("file/read", {}, "file"),
        ("fs/read_file", {"category": "file"}, "file"),
        ("tools/http_request", {}, "web"),
        ("tools/browser_click", {}, "browser"),
        ("tools/update_plan", {}, "workflow"),
        ("supabase/execute-sql", {}, "database"),
        ("x/y", {"category": "not-a-category"}, "agent"),
    ],
)
def test_category(name: str, kw: dict[str, object], category: str) -> None:
    assert classify_category(spec(name, **kw)) == category


@pytest.mark.parametrize(
    ("name", "kw", "expected"),
    [
        ("fs/move_file", {"category": "database"}, ("database", "operator")),
        ("filesystem/move_file", {}, ("file", "server")),
        ("playwright/browser_navigate", {}, ("browser", "tool")),  # a flat name of the table
        ("playwright/browser_snapshot", {}, ("browser", "server")),
        ("fetch/fetch", {}, ("web", "server")),
        ("tools/list_directory", {"title": "List Directory"}, ("file", "tool")),
        ("tools/lookup", {"annotations": {"open_world_hint": True}}, ("web", "annotations")),
        ("tools/lookup", {"annotations": {"read_only_hint": True}}, ("agent", "default")),
    ],
)
def test_category_is_inferred_with_its_source(name: str, kw: dict[str, object], expected: tuple[str, str]) -> None:
    assert category_with_source(spec(name, **kw)) == expected


def test_registry_overrides_listing_and_duplicates() -> None:
    config = EngineConfig.from_data(
        {
            "tools": {
                "shell/*": {"enabled": False},
                "file/read": {"tags": ["files", "read"], "version": "2.0.0"},
                "file/write": {"deprecated": True, "risk": "moderate"},
            }
        }
    )
    seen: list[str] = []
    reg = Registry(config, on_registered=lambda e: seen.append(e.name))
    added = reg.update(
        [
            spec("file/read", description="Read a file"),
            spec("file/write"),
            spec("shell/exec"),
            spec("web/get", description="HTTP GET"),
        ]
    )
    assert [e.name for e in added] == seen == ["file/read", "file/write", "shell/exec", "web/get"]
    assert reg.update([spec("file/read"), spec("web/get")]) == []
    reg.update(
        [
            spec("file/read", description="Read a file"),
            spec("file/write"),
            spec("shell/exec"),
            spec("web/get", description="HTTP GET"),
        ]
    )
    assert reg.require("shell/exec").enabled is False
    assert reg.require("file/write").risk == "moderate"
    basic = Principal("bob", "execute_basic", "enterprise")
    listing = reg.list(runnable=lambda e: Policy().decide(basic, e).allowed)
    assert [e.name for e in listing.tools] == ["file/read", "web/get"]  # disabled and deprecated left out
    data = listing.to_json()
    assert data["totalCount"] == 2 and data["categories"] == ["file", "web"]
    assert data["tools"][0]["runnable"] is True and data["tools"][0]["tags"] == ["files", "read"]
    assert [e.name for e in reg.list(include_deprecated=True, include_disabled=True).tools] == [
        "file/read",
        "file/write",
        "shell/exec",
        "web/get",
    ]
    assert [e.name for e in reg.list(search="http").tools] == ["web/get"]
    assert [e.name for e in reg.list(tags=["files"]).tools] == ["file/read"]
    assert [e.name for e in reg.list(category="web").tools] == ["web/get"]
    with pytest.raises(ConfigError, match="listed twice"):
        reg.update([spec("a/b"), spec("a/b")])


def test_config_defaults_and_merge(tmp_path: Path) -> None:
    c = EngineConfig()
    assert {k: (p.monthly_budget, p.rate_per_minute) for k, p in c.plans.items()} == {
        "free": (100, 100),
        "starter": (1000, 100),
        "team": (10000, 100),
        "enterprise": (None, 100),
    }
    assert c.default_timeout_ms == 30000 and c.local_user_level == "execute_basic"
    path = tmp_path / "engine.yaml"
    path.write_text("plans:\n  free: {monthly_budget: 5}\ncategory_rate_per_minute: {shell: 3}\n")
    c = EngineConfig.load(path)
    assert c.plans["free"].monthly_budget == 5 and c.plans["free"].level == "execute_basic"
    assert c.plans["team"].monthly_budget == 10000 and c.category_rate_per_minute == {"shell": 3}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"default_timeout_ms": 10}))
    with pytest.raises(ConfigError, match="default_timeout_ms"):
        EngineConfig.load(bad)


def test_config_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "engine.json"
    path.write_text(json.dumps({"retention_days": 7, "tool_rate_per_minute": {"web/post": 2}}))
    monkeypatch.setenv("TOOLAGENT_ENGINE_CONFIG", str(path))
    c = EngineConfig.load()
    assert c.retention_days == 7 and c.tool_rate_per_minute == {"web/post": 2}


# -- the matrix for BUILD steps: the runtime's runner over a real (in-process) MCP server ---

#: Tool of the in-process server -> the risk the server config gives it.
STEP_RISKS = {"safe-op": "safe", "moderate-op": "moderate", "dangerous-op": "dangerous"}


def _gate_server(calls: list[str]) -> Any:
    from mcp.server.mcpserver import MCPServer

    def make(name: str) -> Any:
        def op(text: str = "") -> str:
            calls.append(name)
            return f"{name}:{text}"

        return op

    server = MCPServer("gate", log_level="WARNING")
    for tool in STEP_RISKS:
        server.tool(name=tool)(make(tool))
    return server


@pytest.fixture
def in_memory_pool(monkeypatch: pytest.MonkeyPatch) -> tuple[ServersConfig, list[str]]:
    """A pool config whose one server, `gate`, runs in this process over the SDK's in-memory transport
    (the pool's single transport seam, `connect`, is pointed at it); returns it and the server's calls."""
    from mcp import Client

    calls: list[str] = []
    server = _gate_server(calls)

    @contextlib.asynccontextmanager
    async def connect(params: Any, *, errlog: Any, message_handler: Any = None, **_: Any) -> AsyncIterator[Any]:
        async with Client(server, message_handler=message_handler) as client:
            yield client.session

    monkeypatch.setattr("toolagent.mcp.sessions.connect", connect)
    config = ServersConfig.from_data({"mcpServers": {"gate": {"command": "in-memory", "risk": STEP_RISKS}}})
    return config, calls


def _plan(mode: str) -> Any:
    from toolagent.agents import load_definition_text, record_from_definition
    from toolagent.agents.loaders import LoadedAgent
    from toolagent.runs import plan_build

    text = yaml.safe_dump(
        {
            "metadata": {"name": "gate-matrix"},
            "configuration": {
                "tools": [f"gate/{t}" for t in STEP_RISKS],
                "toolExecutionMode": mode,
                "stopOnError": False,
                "toolParams": {f"gate/{t}": {"text": "x"} for t in STEP_RISKS},
            },
        }
    )
    defn = load_definition_text(text)
    return plan_build(LoadedAgent(defn, record_from_definition(defn, text, org="tests"), "gate-matrix"), None)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["sequential", "parallel"])
@pytest.mark.parametrize("level", LEVELS)
async def test_build_step_matrix(
    tmp_path: Path, in_memory_pool: tuple[ServersConfig, list[str]], level: str, mode: str
) -> None:
    from toolagent.mcp.pool import ServerPool
    from toolagent.runtime import Runtime
    from toolagent.store import open_store
    from toolagent.tools.base import CallContext

    config, calls = in_memory_pool
    async with (
        open_store(f"sqlite+aiosqlite:///{tmp_path / 'store.db'}") as store,
        ServerPool(config) as pool,
        Runtime(store, pool=pool) as runtime,
    ):
        me = await runtime.principals.add_user("bob", level=level, plan="enterprise")
        assert not await runtime.catalogue.refresh()
        with anyio.fail_after(10):
            outcome = await runtime.runner(CallContext(me)).run(_plan(mode))
        page = await runtime.history(me, run_id=outcome.run_id)

    allowed = {f"gate/{t}": ALLOWED[(level, risk)] for t, risk in STEP_RISKS.items()}
    assert {s.tool: s.status for s in outcome.steps} == {t: "success" if ok else "denied" for t, ok in allowed.items()}
    for step in outcome.steps:
        risk = STEP_RISKS[step.tool.partition("/")[2]]
        if allowed[step.tool]:
            assert (
                step.error is None
                and step.result is not None
                and step.result.text == f"{step.tool.partition('/')[2]}:x"
            )
        else:
            assert step.error == (
                f"user 'bob' ({level}) may not run '{step.tool}' (risk {risk}): "
                + ("view_only may only view executions; " if level == "view_only" else "")
                + f"requires {REQUIRES[risk]}"
            )
    assert outcome.status == ("success" if all(allowed.values()) else "failed")
    # Denied steps never reached the server, and every step is in the history, denials included.
    assert sorted(calls) == sorted(t.partition("/")[2] for t, ok in allowed.items() if ok)
    assert sorted((e.tool, e.status, e.denied, e.denial) for e in page.executions) == sorted(
        (t, "success", False, None) if ok else (t, "failed", True, "level") for t, ok in allowed.items()
    )
