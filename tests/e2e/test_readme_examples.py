"""Every `toolagent` example in README.md runs as written, in README order, on a fresh store.

The examples are the lines of the fenced `bash` blocks that run `toolagent` (also after `VAR=`
prefixes, inside `$(...)`, or joined with `;`), plus the "From Python" block. Each runs through
bash in a temporary working directory holding copies of `agents/`, `seeds/` and `mcp.json`, as
on a fresh clone, with `toolagent` on PATH. The exit code must be the one the line's comment
states (`# exit N`), else 0; a JSON line right after a command in the same block is its expected
output. The ids a reader substitutes (RUN_ID, DELIVERABLE_ID, EXEC_ID, KEY_ID) are taken from
the store, as a reader would copy them from earlier output.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO_ROOT

pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]
BIN = Path(sys.executable).parent

#: Examples that cannot run here, each with the reason. Matched as substrings of the command.
SKIPPED = {
    "postgresql://user@host/db": "needs a PostgreSQL server at that address (tests/e2e/test_demo_build.py runs "
    "the demo against a throwaway cluster)",
    "serve": "starts a long-running server (tests/e2e/test_cli_first_use.py starts one and checks /docs)",
    "executions cancel EXEC_ID": "needs an execution running in another terminal",
    "examples/mcp.other-servers.json": "needs globally installed third-party servers and the internet "
    "(tests/e2e/test_other_servers_cli.py runs the same agent and config against a local page)",
}


@dataclass
class Example:
    """One README command line, with what the README says it does."""

    line: int
    command: str
    exit_code: int
    expected_json: object | None = None


def readme_examples(text: str) -> list[Example]:
    """The `toolagent` commands of the README's bash blocks, in order."""
    examples: list[Example] = []
    in_bash = False
    lines = text.splitlines()
    for number, raw in enumerate(lines, start=1):
        if number > 1 and lines[number - 2].endswith("\\"):
            continue  # already joined to the line it continues
        follow = number
        while raw.endswith("\\") and follow < len(lines):
            raw = raw[:-1] + lines[follow].lstrip()
            follow += 1
        if raw.startswith("```"):
            in_bash = raw.strip() == "```bash"
            continue
        if not in_bash:
            continue
        if raw.startswith("{") and examples and examples[-1].line == number - 1:
            examples[-1].expected_json = json.loads(raw)
            continue
        command, _, comment = raw.partition("  #")
        if not re.search(r"(^|\$\(|; |=\S* )toolagent ", command.strip()):
            continue
        stated = re.match(r"\s*exit (\d+)", comment)
        examples.append(Example(number, command.strip(), int(stated.group(1)) if stated else 0))
    return examples


def python_example(text: str) -> str:
    """The code block under "### From Python"."""
    section = text.split("### From Python", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def skip_reason(command: str) -> str | None:
    """Why an example cannot run here, or None."""
    for needle, reason in SKIPPED.items():
        if (needle == "serve" and re.search(r"\bserve\b", command)) or (needle != "serve" and needle in command):
            return reason
    return None


class Workspace:
    """A fresh clone's working directory and store, with the README's placeholders filled in."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for name in ("agents", "seeds"):
            shutil.copytree(REPO_ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(REPO_ROOT / "mcp.json", root / "mcp.json")
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLAGENT_", "SUPABASE_"))}
        self.env = {
            **keep,
            "PATH": f"{BIN}{os.pathsep}{keep.get('PATH', '')}",
            "SUPABASE_DEMO_DB": str(root / "demo.sqlite"),
            "TOOLAGENT_DATABASE_URL": f"sqlite+aiosqlite:///{root / 'store.db'}",
            "COLUMNS": "120",
        }

    def sh(self, command: str) -> subprocess.CompletedProcess[str]:
        """Run one command line with bash, as a reader would paste it."""
        return subprocess.run(
            ["bash", "-c", command], cwd=self.root, env=self.env, capture_output=True, text=True, timeout=300
        )

    def json_of(self, command: str) -> object:
        proc = self.sh(command)
        assert proc.returncode == 0, f"{command}: {proc.stderr}"
        return json.loads(proc.stdout)

    def fill(self, command: str) -> str:
        """Replace the ids a reader copies from earlier output."""
        if "RUN_ID" in command or "DELIVERABLE_ID" in command:
            latest = self.json_of("toolagent --json runs list --limit 1")[0]  # type: ignore[index]
            command = command.replace("RUN_ID", latest["id"]).replace("DELIVERABLE_ID", latest["deliverableId"])
        if "EXEC_ID" in command:
            command = command.replace(
                "EXEC_ID", self.json_of("toolagent --json history --limit 1")["executions"][0]["id"]
            )  # type: ignore[index]
        if "KEY_ID" in command:
            command = command.replace("KEY_ID", self.json_of("toolagent --json keys list")[0]["id"])  # type: ignore[index]
        return command


def test_the_readme_lists_a_short_explicit_set_of_skipped_examples() -> None:
    examples = readme_examples((REPO_ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(examples) >= 30
    skipped = [e.command for e in examples if skip_reason(e.command)]
    assert len(SKIPPED) <= 5 and 0 < len(skipped) <= 8, skipped
    assert all(any(needle in e.command for e in examples) for needle in SKIPPED)  # no stale entry


def test_every_readme_example_works_as_written(tmp_path: Path) -> None:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    ws = Workspace(tmp_path)
    failures: list[str] = []
    ran = 0
    for example in readme_examples(text):
        if skip_reason(example.command):
            continue
        command = ws.fill(example.command)
        proc = ws.sh(command)
        ran += 1
        if proc.returncode != example.exit_code:
            failures.append(
                f"README.md:{example.line}: `{command}` exited {proc.returncode}, expected "
                f"{example.exit_code}\n{proc.stderr.strip()[-800:]}"
            )
        elif example.expected_json is not None and json.loads(proc.stdout) != example.expected_json:
            failures.append(f"README.md:{example.line}: `{command}` printed {proc.stdout.strip()}")
    proc = subprocess.run(
        [sys.executable, "-c", python_example(text)],
        cwd=tmp_path,
        env=ws.env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0 or not proc.stdout.startswith("success "):
        failures.append(f"README 'From Python' example: exit {proc.returncode}\n{proc.stdout}{proc.stderr[-800:]}")
    assert ran >= 25
    assert not failures, "\n\n".join(failures)
