"""Every `bash` and `python` block of README.md and docs/ runs as written, or says why it cannot.

A block that cannot run here carries a marker on the line right before its fence,
`<!-- not run: REASON -->`. A block marked `<!-- run with the API server -->` runs while a
`toolagent serve` on a free port serves the page's store (its own `toolagent serve` lines are
that server; `127.0.0.1:8080` in the block is its address; consecutive such blocks share one).

Each page runs in a fresh working directory holding copies of `agents/`, `seeds/`, `examples/`
and `mcp.json`, as on a fresh clone, with `toolagent` on PATH and its own store; the page's
blocks run in order on it. Every line of a `bash` block runs through bash (a `\\` continues it;
`VAR=$(...)` and `export VAR=...` set the variable for the page's later lines). The exit code must
be the one the line's comment states (`# exit N`), else 0; a JSON line right after a command in
the same block is its expected output. The ids a reader substitutes (RUN_ID, DELIVERABLE_ID,
EXEC_ID, KEY_ID) are taken from the store, as a reader would copy them from earlier output. A
`python` block must exit 0, and when its last line is a comment `# prints: TEXT`, print TEXT first.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from _support.repo import REPO_ROOT

pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]
BIN = Path(sys.executable).parent
NOT_RUN = re.compile(r"<!-- not run: (?P<reason>.+?) -->")
WITH_SERVER = "<!-- run with the API server -->"
SHELLS = {"bash", "sh", "shell"}
#: Where the examples say the API listens; replaced by the test server's address.
EXAMPLE_ADDRESS = "127.0.0.1:8080"


def pages() -> list[Path]:
    """README.md and every page of the manual (drafts under docs/_incoming/ are not published)."""
    docs = sorted(p for p in (REPO_ROOT / "docs").rglob("*.md") if "_incoming" not in p.parts)
    return [REPO_ROOT / "README.md", *docs]


@dataclass
class Command:
    """One command line of a bash block, with what the page says it does."""

    line: int
    text: str
    exit_code: int
    expected_json: object | None = None


@dataclass
class Block:
    """One fenced code block."""

    line: int
    language: str
    body: list[tuple[int, str]]
    not_run: str | None = None
    with_server: bool = False
    commands: list[Command] = field(default_factory=list)


def blocks(text: str) -> list[Block]:
    """The page's fenced blocks, with their markers and, for shell blocks, their command lines."""
    found: list[Block] = []
    lines = text.splitlines()
    current: Block | None = None
    for number, raw in enumerate(lines, start=1):
        stripped = raw.strip()
        if current is None:
            if stripped.startswith("```") and len(stripped) > 3:
                before = lines[number - 2].strip() if number > 1 else ""
                marker = NOT_RUN.fullmatch(before)
                current = Block(number, stripped[3:].strip(), [], marker and marker["reason"], before == WITH_SERVER)
            elif stripped.startswith("```"):
                current = Block(number, "", [])
            continue
        if stripped == "```":
            if current.language in SHELLS:
                current.commands = shell_commands(current.body)
            found.append(current)
            current = None
            continue
        current.body.append((number, raw))
    return found


def shell_commands(body: list[tuple[int, str]]) -> list[Command]:
    """A shell block's command lines (continuations joined), their stated exit codes and outputs."""
    commands: list[Command] = []
    index = 0
    while index < len(body):
        number, raw = body[index]
        while raw.endswith("\\") and index + 1 < len(body):
            index += 1
            raw = raw[:-1] + " " + body[index][1].lstrip()
        index += 1
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        if raw.startswith("{") and commands:
            commands[-1].expected_json = json.loads(raw)
            continue
        command, _, comment = raw.partition("  #")
        stated = re.match(r"\s*exit (\d+)", comment)
        commands.append(Command(number, command.strip(), int(stated.group(1)) if stated else 0))
    return commands


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Workspace:
    """A fresh clone's working directory and store, with the page's placeholders filled in."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for name in ("agents", "seeds", "examples"):
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
        self.address = EXAMPLE_ADDRESS

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
        """Replace the ids a reader copies from earlier output, and the example server's address."""
        if "RUN_ID" in command or "DELIVERABLE_ID" in command:
            latest = self.json_of("toolagent --json runs list --limit 1")[0]  # type: ignore[index]
            command = command.replace("RUN_ID", latest["id"]).replace("DELIVERABLE_ID", latest["deliverableId"])
        if "EXEC_ID" in command:
            history = self.json_of("toolagent --json history --limit 1")
            command = command.replace("EXEC_ID", history["executions"][0]["id"])  # type: ignore[index]
        if "KEY_ID" in command:
            command = command.replace("KEY_ID", self.json_of("toolagent --json keys list")[0]["id"])  # type: ignore[index]
        return command.replace(EXAMPLE_ADDRESS, self.address)

    def run(self, command: Command) -> str | None:
        """Run one command line; what went wrong, or None."""
        text = self.fill(command.text)
        # A line that only sets a variable sets it for the page's later lines, as in a terminal.
        assignment = re.fullmatch(r"(?:export )?([A-Za-z_]\w*)=(\$\(.*\)|\"[^\"]*\"|'[^']*'|\S+)", text)
        if assignment:
            name = assignment[1]
            proc = self.sh(f'{text}\nstatus=$?; printf "%s" "${name}"; exit $status')
            if proc.returncode == 0:
                self.env[name] = proc.stdout
        else:
            proc = self.sh(text)
        if proc.returncode != command.exit_code:
            return f"`{text}` exited {proc.returncode}, expected {command.exit_code}\n{proc.stderr.strip()[-800:]}"
        if command.expected_json is not None and json.loads(proc.stdout) != command.expected_json:
            return f"`{text}` printed {proc.stdout.strip()}"
        return None

    def python(self, code: str) -> str | None:
        proc = subprocess.run(
            [sys.executable, "-c", code], cwd=self.root, env=self.env, capture_output=True, text=True, timeout=300
        )
        last = code.rstrip().splitlines()[-1].strip()
        expected = last.removeprefix("# prints: ") if last.startswith("# prints: ") else ""
        if proc.returncode != 0 or not proc.stdout.startswith(expected):
            return f"exit {proc.returncode}, expected output starting {expected!r}\n{proc.stdout}{proc.stderr[-800:]}"
        return None

    @contextmanager
    def server(self) -> Iterator[None]:
        """`toolagent serve` on a free port, on this workspace's store and servers."""
        port = _free_port()
        proc = subprocess.Popen(
            ["toolagent", "serve", "--port", str(port), "--log-level", "warning"],
            cwd=self.root,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "toolagent serve did not answer /health within 60 s"
                time.sleep(0.2)
            self.address = f"127.0.0.1:{port}"
            yield
        finally:
            self.address = EXAMPLE_ADDRESS
            proc.terminate()
            proc.wait(timeout=20)


def _page_id(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT))


def test_every_block_runs_or_says_why_not() -> None:
    unmarked: list[str] = []
    ran = marked = 0
    for page in pages():
        for block in blocks(page.read_text(encoding="utf-8")):
            runnable = block.language in SHELLS | {"python"}
            if block.not_run is not None:
                assert runnable, f"{_page_id(page)}:{block.line}: a `not run` marker on a {block.language!r} block"
                assert len(block.not_run) >= 15, f"{_page_id(page)}:{block.line}: say why it cannot run here"
                marked += 1
            elif runnable:
                ran += len(block.commands) if block.language in SHELLS else 1
                if block.language in SHELLS and not block.commands:
                    unmarked.append(f"{_page_id(page)}:{block.line}: a shell block with no command")
    assert not unmarked, unmarked
    # The examples are mostly run, not marked: a short list of blocks says why it cannot run here
    # (most of them the setup of a hosted Supabase project, which cannot be reached from here).
    assert ran >= 50 and marked <= 20, (ran, marked)


def runnable_blocks(page: Path) -> list[Block]:
    """The page's blocks this test runs."""
    return [
        b
        for b in blocks(page.read_text(encoding="utf-8"))
        if b.not_run is None and (b.language in SHELLS or b.language == "python")
    ]


@pytest.mark.parametrize("page", [p for p in pages() if runnable_blocks(p)], ids=_page_id)
def test_the_page_examples_work_as_written(page: Path, tmp_path: Path) -> None:
    runnable = runnable_blocks(page)
    ws = Workspace(tmp_path)
    failures: list[str] = []
    with ExitStack() as serving:
        for block in runnable:
            # One server serves a run of consecutive blocks that ask for it.
            if block.with_server and ws.address == EXAMPLE_ADDRESS:
                serving.enter_context(ws.server())
            elif not block.with_server:
                serving.close()
            if block.language == "python":
                problem = ws.python("\n".join(line for _, line in block.body))
                if problem:
                    failures.append(f"{_page_id(page)}:{block.line}: python block: {problem}")
                continue
            for command in block.commands:
                if block.with_server and re.match(r"toolagent( --\S+ \S+)* serve\b", command.text):
                    continue  # the test's server is this one
                problem = ws.run(command)
                if problem:
                    failures.append(f"{_page_id(page)}:{command.line}: {problem}")
    assert not failures, "\n\n".join(failures)
