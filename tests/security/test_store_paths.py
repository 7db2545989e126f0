"""`--db` naming a SQLite file that cannot be made: one line naming the path and the reason, exit 2,
no traceback: a regular file where a folder should be, a pseudo file system (`/proc`), a folder
that cannot be made under it, and (where this test may mount one) a read-only file system."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolagent.cli import app

runner = CliRunner()


@contextlib.contextmanager
def read_only_mount(where: Path) -> Iterator[Path]:
    where.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "ro", "tmpfs", str(where)]).returncode:
        pytest.skip("mounting a read-only file system needs root")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


def cases(tmp_path: Path) -> dict[str, tuple[str, str]]:
    (tmp_path / "plain").write_text("not a folder")
    return {
        "file parent": (str(tmp_path / "plain" / "store.db"), f"{tmp_path / 'plain'} is a file, not a folder"),
        "deeper file parent": (str(tmp_path / "plain" / "a" / "b.db"), f"{tmp_path / 'plain'} is a file, not a folder"),
        "missing folder on a pseudo file system": ("/proc/no-such/store.db", "/proc/no-such does not exist"),
        "pseudo file system": ("/proc/store.db", "no file can be made in /proc"),
        "sqlite URL": (f"sqlite+aiosqlite:///{tmp_path / 'plain' / 'x.db'}", "is a file, not a folder"),
    }


@pytest.mark.parametrize(
    "case",
    ["file parent", "deeper file parent", "missing folder on a pseudo file system", "pseudo file system", "sqlite URL"],
)
def test_a_store_path_that_cannot_be_made_is_one_line_and_exit_two(tmp_path: Path, case: str) -> None:
    db, reason = cases(tmp_path)[case]
    result = runner.invoke(app, ["--db", db, "history"])
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith("error: cannot create the SQLite store ") and reason in lines[0], lines[0]
    assert "TOOLAGENT_DATABASE_URL" in lines[0]


def test_a_store_on_a_read_only_file_system(tmp_path: Path) -> None:
    with read_only_mount(tmp_path / "ro") as ro:
        result = runner.invoke(app, ["--db", str(ro / "sub" / "store.db"), "history"])
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and f"{ro / 'sub'} is on a read-only file system" in result.stderr
