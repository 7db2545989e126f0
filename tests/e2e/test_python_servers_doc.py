"""The example of docs/python-servers.md runs as written: its module, mcp.json and agent
files, then its commands through bash in a fresh directory with a fresh store; a missing module
fails with the message the page shows."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from _support.repo import REPO_ROOT

pytestmark = pytest.mark.timeout(300)
PAGE = REPO_ROOT / "docs" / "python-servers.md"
BIN = Path(sys.executable).parent


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.S | re.M)


@pytest.fixture
def folder(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    text = PAGE.read_text(encoding="utf-8")
    module = blocks(text, "python")[0]
    name = module.splitlines()[0].removeprefix("# ").strip()
    (tmp_path / name).write_text(module)
    (tmp_path / "mcp.json").write_text(blocks(text, "json")[0])
    (tmp_path / "notes.yaml").write_text(blocks(text, "yaml")[0])
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLAGENT_", "PYTHONPATH"))}
    env = {
        **keep,
        "PATH": f"{BIN}{os.pathsep}{keep.get('PATH', '')}",
        "TOOLAGENT_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'store.db'}",
    }
    return tmp_path, env


def sh(folder: Path, env: dict[str, str], command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=folder, env=env, capture_output=True, text=True, timeout=120)


def test_the_pages_example_runs_as_written(folder: tuple[Path, dict[str, str]]) -> None:
    root, env = folder
    commands = [line for block in blocks(PAGE.read_text(), "bash") for line in block.splitlines() if line.strip()]
    assert commands[1].startswith("PYTHONPATH=. toolagent build notes.yaml")
    for command in commands:
        done = sh(root, env, command)
        assert done.returncode == 0, f"{command}: {done.stderr}"
    listed = sh(root, env, "PYTHONPATH=. toolagent --json tools list --server notes")
    assert sorted(t["name"] for t in json.loads(listed.stdout)["tools"]) == ["notes/add_note", "notes/find_notes"]
    built = sh(root, env, commands[1].replace("toolagent build", "toolagent --json build"))
    results = json.loads(built.stdout)["deliverable"]["data"]["results"]
    # What the page says the second step returns (each build is a new process: the notes start empty).
    found = results[1]["structuredContent"]["result"]
    assert [n["text"] for n in found] == ["buy milk"] and found[0]["tags"] == ["demo"]
    history = json.loads(sh(root, env, "toolagent --json history").stdout)["executions"]
    assert sorted({(r["toolName"], r["status"]) for r in history}) == [
        ("notes/add_note", "success"),
        ("notes/find_notes", "success"),
    ]


def test_a_module_that_is_not_importable_fails_with_the_pages_message(folder: tuple[Path, dict[str, str]]) -> None:
    root, env = folder
    shown = next(line for line in blocks(PAGE.read_text(), "text") if "no module named" in line).strip()
    done = sh(root, env, 'toolagent build notes.yaml --payload \'{"text": "a", "word": "a"}\'')  # no PYTHONPATH
    assert done.returncode == 2
    assert shown in done.stderr
