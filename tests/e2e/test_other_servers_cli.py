"""The README's "Using other MCP servers" example, run as written through the CLI: the example
mcp.json (filesystem, git and Playwright MCP with Debian's chromium) and agents/page-to-git.yaml.
Also: a server that never starts is announced on stderr and waited for once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _support.mcp_harness import served_page
from _support.repo import NODE_BIN, REPO_ROOT

pytestmark = pytest.mark.timeout(240)

TOOLAGENT = Path(sys.executable).parent / "toolagent"
PEERS_BIN = REPO_ROOT / ".venv-peers" / "bin"
EXAMPLE_CONFIG = REPO_ROOT / "examples" / "mcp.other-servers.json"
EXAMPLE_AGENT = REPO_ROOT / "agents" / "page-to-git.yaml"


@pytest.fixture()
def site(tmp_path: Path) -> Iterator[str]:
    with served_page(tmp_path / "site") as url:
        yield url


def toolagent(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(TOOLAGENT), *args], env=env, capture_output=True, text=True, timeout=180)


@pytest.mark.usefixtures("node_bin")
def test_readme_example_chains_playwright_filesystem_and_git(tmp_path: Path, site: str) -> None:
    if not Path("/usr/bin/chromium").exists():
        pytest.skip("Debian's chromium is not installed (scripts/bootstrap --with-node installs it as root)")
    if not (PEERS_BIN / "mcp-server-git").exists():
        pytest.skip(f"{PEERS_BIN}/mcp-server-git is missing: run `scripts/bootstrap --with-node`")
    repo = tmp_path / "repo"
    repo.mkdir()
    for cmd in (["init", "-q"], ["config", "user.email", "t@example.com"], ["config", "user.name", "T"]):
        subprocess.run(["git", *cmd], cwd=repo, check=True)
    env = {
        **os.environ,
        "PATH": f"{NODE_BIN}:{PEERS_BIN}:{os.environ['PATH']}",
        "TOOLAGENT_WORKSPACE": str(repo),
        "PLAYWRIGHT_MCP_OUTPUT": str(tmp_path / "pw"),
        "TOOLAGENT_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}",
    }
    env.pop("TOOLAGENT_USER", None)
    env.pop("TOOLAGENT_ENGINE_CONFIG", None)

    checked = toolagent(env, "agents", "validate", str(EXAMPLE_AGENT))
    assert checked.returncode == 0, checked.stderr
    added = toolagent(env, "users", "add", "archivist", "--level", "execute_advanced")
    assert added.returncode == 0, added.stderr
    payload = json.dumps({"url": site, "repo_path": str(repo)})
    built = toolagent(
        env, "--servers", str(EXAMPLE_CONFIG), "--user", "archivist", "build", str(EXAMPLE_AGENT), "-p", payload
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert built.stdout.startswith("# Page snapshot to git: success")
    assert 'heading "Hello from the test"' in (repo / "snapshot.md").read_text()
    log = subprocess.run(["git", "log", "--format=%s", "--", "snapshot.md"], cwd=repo, capture_output=True, text=True)
    assert log.stdout.strip() == f"Snapshot of {site}"

    [run] = json.loads(toolagent(env, "--json", "runs", "list").stdout)
    steps = json.loads(toolagent(env, "--json", "runs", "show", run["id"]).stdout)["steps"]
    add = next(s for s in steps if s["tool"] == "git/git_add")
    assert add["paramSources"] == {"files": "params", "repo_path": "payload.repo_path"}


def test_a_server_that_never_starts_is_announced_and_waited_for_once(tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    hang = f"open({str(starts)!r}, 'a').write('start\\n'); import time; time.sleep(120)"
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps({"mcpServers": {"slow": {"command": sys.executable, "args": ["-c", hang], "connect_timeout_s": 2}}})
    )
    agent = tmp_path / "slow.yaml"
    agent.write_text("metadata: {name: slow}\nconfiguration:\n  tools: [slow/anything]\n")
    env = {**os.environ, "TOOLAGENT_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}"}
    env.pop("TOOLAGENT_USER", None)
    env.pop("TOOLAGENT_ENGINE_CONFIG", None)
    built = toolagent(env, "--servers", str(config), "build", str(agent))
    assert built.returncode == 1, built.stdout + built.stderr
    assert built.stderr.count("starting MCP server 'slow' (waiting up to 2 s) ...") == 1, built.stderr
    assert "no answer within 2 s" in built.stdout + built.stderr
    assert starts.read_text().splitlines() == ["start"]
