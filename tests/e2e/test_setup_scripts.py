"""`scripts/demo` and `scripts/test` say what they are doing while they install: one line per phase
on stderr. They run in a copy of the repo's scripts where `python3`, `npm` and the virtualenv's
python are stand-ins that record their calls, so the phases run in order without downloading."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from _support.repo import REPO_ROOT

STUB = """#!/usr/bin/env bash
# A stand-in for python3 / the venv's python / npm: records the call; `-m venv DIR` and `npm install`
# leave what the real ones would, so a second run finds them.
echo "$(basename "$0") $*" >> "$STUB_LOG"
if [ "${1:-} ${2:-}" = "-m venv" ]; then mkdir -p "$3/bin"; cp "$0" "$3/bin/python"; cp "$0" "$3/bin/toolagent"; fi
if [ "${1:-}" = install ]; then mkdir -p node_modules/@modelcontextprotocol/server-everything node_modules/@playwright/mcp; fi
case "$*" in *mcp-server-git*) for s in git time fetch; do cp "$0" "$(dirname "$0")/mcp-server-$s"; done;; esac
exit 0
"""


def _executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def fresh_clone(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "clone"
    shutil.copytree(REPO_ROOT / "scripts", root / "scripts")
    shutil.copy(REPO_ROOT / "pyproject.toml", root / "pyproject.toml")
    (root / "tests" / "node").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "tests" / "node" / "package.json", root / "tests" / "node" / "package.json")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _executable(bin_dir / "python3", STUB)
    _executable(bin_dir / "npm", STUB)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("TOOLAGENT_", "PYTHON"))},
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "STUB_LOG": str(tmp_path / "calls.log"),
        # The suite's own database: no cluster is started or installed here.
        "TOOLAGENT_TEST_PG_URL": "postgresql://stub@127.0.0.1/none",
    }
    return root, env


def _phases(stderr: str) -> list[str]:
    return [
        line
        for line in stderr.splitlines()
        if line.startswith(("toolagent setup:", "toolagent test:", "toolagent demo:"))
    ]


@pytest.mark.skipif(
    not Path("/usr/bin/chromium").exists() and os.geteuid() == 0, reason="scripts/bootstrap would install chromium here"
)
def test_scripts_test_says_each_install_phase(fresh_clone: tuple[Path, dict[str, str]]) -> None:
    root, env = fresh_clone
    proc = subprocess.run(
        ["scripts/test", "-q"],
        cwd=root,
        env={**env, "TOOLAGENT_TEST_WORKERS": "3"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    phases = _phases(proc.stderr)
    assert [p.split(":")[1].split()[0:3] for p in phases] == [
        ["creating", "the", "virtualenv"],
        ["installing", "python", "packages"],
        ["installing", "the", "npm"],
        ["installing", "the", "PyPI"],
        ["running", "pytest", "with"],
    ], phases
    assert phases[-1] == "toolagent test: running pytest with 3 workers"
    calls = Path(env["STUB_LOG"]).read_text().splitlines()
    assert calls[-1] == "python -m pytest -n 3 --dist worksteal -q"
    # A second run has nothing to install and says only that it runs the tests; one worker runs
    # them in one process, and an explicit -n is passed through as given.
    again = subprocess.run(
        ["scripts/test"],
        cwd=root,
        env={**env, "TOOLAGENT_TEST_WORKERS": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert _phases(again.stderr) == ["toolagent test: running pytest"]
    assert Path(env["STUB_LOG"]).read_text().splitlines()[-1] == "python -m pytest"
    given = subprocess.run(["scripts/test", "-n", "2"], cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert given.returncode == 0, given.stderr
    assert Path(env["STUB_LOG"]).read_text().splitlines()[-1] == "python -m pytest -n 2"


def test_scripts_demo_says_each_phase(fresh_clone: tuple[Path, dict[str, str]]) -> None:
    root, env = fresh_clone
    proc = subprocess.run(
        ["scripts/demo", "-q", "how many users"], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    phases = _phases(proc.stderr)
    assert len(phases) == 3 and "virtualenv" in phases[0] and "python packages" in phases[1], phases
    assert phases[2].startswith("toolagent demo: seeding demo/supabase-agent")
    assert Path(env["STUB_LOG"]).read_text().splitlines()[-1] == "toolagent demo -q how many users"
