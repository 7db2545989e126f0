"""Bad command-line inputs end with one `error:` line naming the input and the fix and exit 2 — never
a Python traceback. Each row of `BAD_INPUTS` is one input; add a line to add one. `{d}` is a
folder holding the files the rows name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _support.repo import REPO_ROOT

pytestmark = pytest.mark.timeout(300)

DEEP = "[" * 5000 + "]" * 5000
#: (name, arguments after the global --db/--servers, exit code, text the error line holds)
BAD_INPUTS: list[tuple[str, list[str], int, str]] = [
    ("payload file not UTF-8", ["build", "{d}/ok.yaml", "-p", "@{d}/latin1.json"], 2, "--payload is not UTF-8"),
    (
        "payload integer of 5000 digits",
        ["build", "{d}/ok.yaml", "-p", '{"a": 1' + "0" * 5000 + "}"],
        2,
        "--payload holds an integer",
    ),
    ("payload nested 5000 deep", ["build", "{d}/ok.yaml", "-p", '{"a": ' + DEEP + "}"], 2, "--payload nested deeper"),
    ("payload with a NUL", ["build", "{d}/ok.yaml", "-p", '{"a": "x\\u0000y"}'], 2, "--payload.a contains a NUL"),
    ("payload file with a NUL", ["build", "{d}/ok.yaml", "-p", "@{d}/nul.json"], 2, "--payload.a contains a NUL"),
    ("payload with a lone surrogate", ["build", "{d}/ok.yaml", "-p", '{"a": "\\ud800"}'], 2, "lone UTF-16 surrogate"),
    ("payload with NaN", ["build", "{d}/ok.yaml", "-p", '{"a": NaN}'], 2, "NaN is not a JSON number"),
    (
        "override nested 5000 deep",
        ["build", "{d}/ok.yaml", "-o", '{"toolParams": ' + DEEP + "}"],
        2,
        "--override nested deeper",
    ),
    (
        "tool arguments with a NUL",
        ["tools", "call", "probe/echo", "-a", '{"text": "x\\u0000y"}'],
        2,
        "--args.text contains a NUL",
    ),
    ("agent file not UTF-8", ["build", "{d}/latin1.yaml"], 2, "latin1.yaml: is not UTF-8 text"),
    ("agent file not UTF-8, upsert", ["agents", "upsert", "{d}/latin1.yaml"], 2, "is not UTF-8 text"),
    ("agent file with a NUL", ["agents", "upsert", "{d}/nul.yaml"], 2, "metadata.name: contains a NUL"),
    ("agent file nested 5000 deep", ["build", "{d}/deep.json"], 2, "nested too deep"),
    ("seed file not UTF-8", ["seed", "{d}/latin1.json"], 2, "is not UTF-8 text"),
    ("runs list --agent without a slash", ["runs", "list", "--agent", "noslash"], 2, "is not ORG/SLUG"),
    ("prune past the calendar", ["executions", "prune", "--older-than-days", "999999999"], 2, "--older-than-days"),
    (
        "database URL with a bad port",
        ["--db", "postgresql://u@h:notaport/x", "runs", "list"],
        2,
        "invalid database URL in --db",
    ),
    (
        "database URL with a broken IPv6 host",
        ["--db", "postgresql://u@[::1/x", "runs", "list"],
        2,
        "invalid database URL in --db",
    ),
    ("database URL naming a directory", ["--db", "sqlite+aiosqlite:///{d}/adir", "runs", "list"], 2, "is a directory"),
    ("server config not UTF-8", ["--servers", "{d}/latin1.json", "tools", "list"], 2, "is not UTF-8 text"),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("cli_inputs")
    (d / "adir").mkdir()
    (d / "ok.yaml").write_text("metadata: {name: ok}\nconfiguration: {tools: [probe/echo]}\n")
    (d / "latin1.yaml").write_bytes("metadata: {name: caf\u00e9}\n".encode("latin-1"))
    (d / "latin1.json").write_bytes('{"a": "caf\u00e9"}'.encode("latin-1"))
    (d / "nul.json").write_text('{"a": "x\\u0000y"}')
    (d / "nul.yaml").write_text('metadata: {name: "x\\0y"}\nconfiguration: {tools: [probe/echo]}\n')
    (d / "deep.json").write_text('{"metadata": ' + DEEP + "}")
    (d / "mcp.json").write_text(json.dumps({"mcpServers": {}}))
    return d


@pytest.mark.parametrize(("name", "args", "code", "needle"), BAD_INPUTS, ids=[row[0] for row in BAD_INPUTS])
def test_bad_input_is_one_line_and_exit_2(files: Path, name: str, args: list[str], code: int, needle: str) -> None:
    args = [a.replace("{d}", str(files)) for a in args]
    base = ["--db", f"sqlite+aiosqlite:///{files / 'store.db'}", "--servers", str(files / "mcp.json")]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
        "COLUMNS": "200",
    }
    env.pop("TOOLAGENT_DATABASE_URL", None)
    proc = subprocess.run(
        [sys.executable, "-c", "from toolagent.cli import app; app(prog_name='toolagent')", *base, *args],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=120,
        env=env,
        cwd=files,
    )
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-3000:]
    assert proc.returncode == code, proc.stderr[-2000:]
    assert needle in proc.stderr, proc.stderr[-2000:]
    if proc.stderr.startswith("error:"):
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
