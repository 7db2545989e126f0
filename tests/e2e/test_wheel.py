"""The package stands on its own: its wheel, installed into a fresh virtualenv outside the repo
(the tests' dependencies on its path), runs `toolagent demo` in an empty folder (seeds, demo
data, server config and migrations all come from inside the package)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from _support.repo import REPO_ROOT

from toolagent.store.migrations import head_revision

pytestmark = [pytest.mark.wheel, pytest.mark.timeout(900), pytest.mark.slow]


def _run(args: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600) -> str:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    return proc.stdout


def _clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without anything pointing at the checkout or configuring toolagent."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME") and not k.startswith(("TOOLAGENT_", "SUPABASE_"))
    }
    return {**env, **extra}


def test_the_installed_wheel_runs_the_demo_outside_the_repo(tmp_path: Path) -> None:
    # Build from a copy holding only what a source distribution holds, so nothing else in the
    # checkout (the top-level seeds/ and mcp.json, tests, caches) can leak into the wheel.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    shutil.copytree(REPO_ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    dist = tmp_path / "dist"
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)],
        cwd=tmp_path,
        env=_clean_env(),
    )
    (wheel,) = dist.glob("toolagent-*.whl")

    # The fresh virtualenv gets no pip of its own (this process's pip installs into it) and
    # borrows the dependencies already installed for the tests (a plain path in a .pth file: the
    # checkout's editable install there is not activated) instead of installing them again; both
    # were most of this test's minute. The wheel itself is installed for real and comes first.
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path, env=_clean_env())
    python = venv / "bin" / "python"
    own = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp_path)
    Path(own.strip(), "test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)],
        cwd=tmp_path,
        env=_clean_env(),
    )
    located = _run([str(python), "-c", "import toolagent; print(toolagent.__file__)"], cwd=tmp_path, env=_clean_env())
    assert located.strip().startswith(own.strip()), located

    work = tmp_path / "empty"
    work.mkdir()
    env = _clean_env(SUPABASE_DEMO_DB=str(tmp_path / "demo.sqlite"))
    out = _run([str(venv / "bin" / "toolagent"), "--json", "demo"], cwd=work, env=env)
    payload = json.loads(out)
    assert payload["status"] == "success"
    steps = payload["deliverable"]["data"]["results"]
    assert [s["status"] for s in steps] == ["success"] * 4
    executed = steps[2]["structuredContent"]
    assert executed["row_count"] == 10 and len(executed["rows"]) == 10
    # The store it made, in the user's data directory (not the working directory), is migrated by
    # the revisions shipped in the wheel.
    assert not (work / ".toolagent").exists()
    store = Path(os.environ["XDG_DATA_HOME"]) / "toolagent" / "toolagent.db"
    with contextlib.closing(sqlite3.connect(store)) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(head_revision(),)]
    location = _run(
        [str(venv / "bin" / "python"), "-c", "import toolagent, sys; sys.stdout.write(toolagent.__file__)"],
        cwd=work,
        env=env,
    )
    assert Path(location).is_relative_to(venv)
