"""BUILD runs against the MCP servers people run, over stdio: the reference fetch, git, time
(PyPI, in `.venv-peers`), filesystem, memory, sequential-thinking and everything servers and
Playwright MCP (npm). Implicit chaining after unstructured results, deliverables keeping images
and resources, categories inferred for servers nobody classified.
"""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from _support.mcp_harness import node_config, served_page, servers
from _support.repo import NODE_BIN, REPO_ROOT

from toolagent.agents import load_definition_text, record_from_definition
from toolagent.agents.loaders import LoadedAgent
from toolagent.engine.registry import Registry
from toolagent.mcp.config import ServersConfig
from toolagent.mcp.pool import ServerPool
from toolagent.runs import RunOutcome, plan_build
from toolagent.runs.deliverable import attachments
from toolagent.store import open_store
from toolagent.testing import test_runtime
from toolagent.tools.base import CallContext

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180), pytest.mark.usefixtures("node_bin")]

PEERS_BIN = REPO_ROOT / ".venv-peers" / "bin"
CHROMIUM = Path("/usr/bin/chromium")


def peer(name: str, *args: str) -> dict[str, Any]:
    """Config entry of a PyPI reference server installed in `.venv-peers`."""
    exe = PEERS_BIN / name
    if not exe.exists():
        pytest.skip(f"{exe} is missing: run `scripts/bootstrap --with-node` to install the Python MCP peers")
    return {"command": str(exe), "args": list(args)}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A page served on 127.0.0.1 (the fetch server and Chromium read it)."""
    with served_page(tmp_path_factory.mktemp("site")) as url:
        yield url


def agent(configuration: dict[str, Any], name: str = "peers") -> LoadedAgent:
    text = yaml.safe_dump({"metadata": {"name": name, "version": "1.0.0"}, "configuration": configuration})
    defn = load_definition_text(text)
    return LoadedAgent(defn, record_from_definition(defn, text, org="tests"), name)


async def run_builds(
    tmp_path: Path,
    config: ServersConfig,
    runs: list[tuple[dict[str, Any], dict[str, Any]]],
) -> list[tuple[RunOutcome, list[Any], Any]]:
    """Each (configuration, payload) run through one pool; returns outcomes, steps and deliverables."""
    found = []
    async with (
        open_store(f"sqlite+aiosqlite:///{tmp_path / 'store.db'}") as store,
        test_runtime(store, ServerPool(config)) as (runtime, me),
    ):
        for configuration, payload in runs:
            with anyio.fail_after(120):
                outcome = await runtime.runner(CallContext(me), default_timeout_s=60).run(
                    plan_build(agent(configuration), None), payload
                )
            steps = await store.runs.get_steps(outcome.run_id)
            found.append((outcome, steps, await store.runs.get_deliverable(outcome.deliverable["id"])))
    return found


async def test_unstructured_result_never_fills_content_implicitly(tmp_path: Path, site: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    config = servers(
        fetch=peer("mcp-server-fetch", "--ignore-robots-txt", "--allow-private-ips"),
        fs=node_config("mcp-server-filesystem", str(work)),
    )
    implicit = {
        "tools": ["fetch/fetch", "fs/write_file"],
        "toolParams": {
            "fetch/fetch": {"url": "{{payload.url}}", "raw": True},
            "fs/write_file": {"path": str(work / "implicit.txt")},
        },
    }
    explicit = {
        "tools": ["fetch/fetch", "fs/write_file"],
        "toolParams": {
            "fetch/fetch": {"url": "{{payload.url}}", "raw": True},
            "fs/write_file": {"path": str(work / "page.html"), "content": "{{previous._result.text}}"},
        },
    }
    (first, first_steps, _), (second, second_steps, _) = await run_builds(
        tmp_path,
        config,
        [
            (implicit, {"url": site, "content": "from the payload"}),
            (explicit, {"url": site}),
        ],
    )
    assert first.status == "success", first.error
    assert first_steps[1].param_sources == {"path": "params", "content": "payload.content"}
    assert (work / "implicit.txt").read_text() == "from the payload"
    assert second.status == "success", second.error
    assert "Hello from the test" in (work / "page.html").read_text()


async def test_git_result_view_puts_text_under_result(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "new.txt").write_text("x")
    config = servers(git=peer("mcp-server-git", "--repository", str(repo)), memory=node_config("mcp-server-memory"))
    # git_status returns only text: `repo_path` comes from the payload, and its text and status
    # are read under `_result`.
    configuration = {
        "tools": ["git/git_status", "memory/search_nodes"],
        "toolParams": {"memory/search_nodes": {"query": "{{previous._result.status}}"}},
    }
    [(outcome, steps, _)] = await run_builds(tmp_path, config, [(configuration, {"repo_path": str(repo)})])
    assert outcome.status == "success", outcome.error
    assert steps[0].param_sources == {"repo_path": "payload.repo_path"}
    assert steps[1].params == {"query": "success"}


async def test_deliverable_keeps_images_links_and_embedded_resources(tmp_path: Path) -> None:
    config = servers(everything=node_config("mcp-server-everything", "stdio"))
    tools = ["everything/get-tiny-image", "everything/get-resource-links", "everything/get-resource-reference"]
    as_json = {
        "tools": tools,
        "toolParams": {"everything/get-resource-links": {"count": 2}},
        "deliverable": {"format": "json"},
    }
    as_markdown = {**as_json, "deliverable": {"format": "markdown"}}
    (run_json, steps, dlv_json), (_, _, dlv_md) = await run_builds(tmp_path, config, [(as_json, {}), (as_markdown, {})])
    assert run_json.status == "success", run_json.error
    image, links, embedded = (r["attachments"] for r in dlv_json.data["results"])
    assert [(a["type"], a["mimeType"]) for a in image] == [("image", "image/png")]
    assert image[0]["size"] == len(base64.b64decode(image[0]["data"])) > 0
    assert [a["type"] for a in links] == ["resource_link", "resource_link"] and all(a["uri"] for a in links)
    assert embedded[0]["type"] == "resource" and embedded[0]["uri"] == "demo://resource/dynamic/text/1"
    assert embedded[0]["text"].startswith("Resource 1:")
    stored = json.loads(dlv_json.content)
    assert stored["results"][0]["attachments"][0]["data"] == image[0]["data"]
    assert "![image](data:image/png;base64," in dlv_md.content
    assert f"resource link [{links[0]['name']}]({links[0]['uri']})" in dlv_md.content
    assert "resource `demo://resource/dynamic/text/1` (text/plain" in dlv_md.content
    # Past the cap the data stays in the step record, and the deliverable points there.
    capped = attachments(steps[0].result["content"], run_id=run_json.run_id, position=0, max_bytes=10)
    assert capped == [
        {
            "type": "image",
            "mimeType": "image/png",
            "size": image[0]["size"],
            "truncated": True,
            "storedIn": {"runId": run_json.run_id, "step": 0},
        }
    ]


async def test_servers_nobody_classified_get_inferred_categories(tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (scripts/bootstrap --with-node installs it as root)")
    config = servers(
        filesystem=node_config("mcp-server-filesystem", str(tmp_path)),
        playwright={
            "command": str(NODE_BIN / "playwright-mcp"),
            "args": [
                "--executable-path",
                str(CHROMIUM),
                "--headless",
                "--isolated",
                "--no-sandbox",
                "--output-dir",
                str(tmp_path / "pw"),
            ],
        },
        memory=node_config("mcp-server-memory"),
        thinking=node_config("mcp-server-sequential-thinking"),
        fetch=peer("mcp-server-fetch"),
        tz=peer("mcp-server-time"),
    )
    async with ServerPool(config) as pool:
        specs, errors = await pool.all_tools()
    assert errors == {}
    entries = Registry().update(specs)
    by_server: dict[str, set[tuple[str, str]]] = {}
    for e in entries:
        by_server.setdefault(e.spec.server, set()).add((e.category, e.category_source))
    assert by_server["filesystem"] == {("file", "server")}
    assert {c for c, _ in by_server["playwright"]} == {"browser"}
    assert by_server["memory"] == {("memory", "server")}
    assert by_server["thinking"] == {("ai", "server")}
    assert by_server["fetch"] == {("web", "server")}
    # "tz" names no category: the tool names do (get_current_time, convert_time).
    assert by_server["tz"] == {("system", "tool")}
    tools = {e.name: e for e in entries}
    assert (tools["filesystem/read_text_file"].risk, tools["filesystem/write_file"].risk) == ("safe", "dangerous")
    assert tools["playwright/browser_navigate"].to_json()["categorySource"] == "tool"
