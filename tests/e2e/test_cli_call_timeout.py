"""`toolagent tools call --timeout` against a server that ignores the cancellation (the stuck
server's `busy` blocks it and ignores SIGTERM): the error is printed at the deadline, then the
server gets a short grace and is stopped, and only then does the CLI exit (code 1), promptly."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _support.mcp_harness import stuck_config

from toolagent.mcp.server_process import supported

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(not supported(), reason="the server is stopped by its process id on Linux"),
]

TOOLAGENT = Path(sys.executable).parent / "toolagent"
#: A hang guard on the server's stop after the error: the SDK alone waits 2 s for the server to
#: leave after its stdin closes, then 2 s after SIGTERM (which `busy` ignores) before SIGKILL; the
#: grace and stop take a fraction of a second. The interpreter's own exit comes after, unguarded.
STOP_GUARD_S = 2.0


def read_line(fd: int, buffer: bytearray, guard_s: float = 60) -> str:
    while b"\n" not in buffer:
        ready, _, _ = select.select([fd], [], [], guard_s)
        assert ready, f"nothing written in {guard_s} s"
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        buffer += chunk
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    return line.decode()


def test_a_timed_out_call_stops_a_server_that_ignores_the_cancellation(tmp_path: Path) -> None:
    fifo = tmp_path / "stuck.fifo"
    os.mkfifo(fifo)
    log_fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    servers = tmp_path / "mcp.json"
    servers.write_text(json.dumps({"mcpServers": {"stuck": stuck_config(fifo, risk="safe")}}))
    db = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    args = ["tools", "call", "stuck/busy", "--args", '{"seconds": 90}', "--timeout", "1000"]
    cli = subprocess.Popen([str(TOOLAGENT), "--db", db, "--servers", str(servers), *args], stderr=subprocess.PIPE)
    server_pid = None
    try:
        assert cli.stderr is not None
        log, err = bytearray(), bytearray()
        event = json.loads(read_line(log_fd, log))
        assert (event["event"], event["tool"]) == ("call", "busy")
        server_pid = int(event["pid"])
        lines: list[str] = []
        while not any(line.startswith("error:") for line in lines):
            lines.append(read_line(cli.stderr.fileno(), err))
            assert lines[-1] or cli.poll() is None, lines
        assert "timeout after 1000 ms" in lines[-1], lines
        errored_at = time.monotonic()
        assert _exits(server_pid, STOP_GUARD_S), f"server {server_pid} still running {STOP_GUARD_S} s after the error"
        stopped_after_s = time.monotonic() - errored_at
        assert cli.wait(timeout=30) == 1, lines
        exited_after_s = time.monotonic() - errored_at
        rest = bytes(log) + _drain(log_fd)
        assert b'"done"' not in rest  # stopped in its call: it never finished it
        # For the record, not asserted: the interpreter's exit under load is most of the second figure.
        print(f"server stopped {stopped_after_s:.2f} s and CLI exited {exited_after_s:.2f} s after the error")
    finally:
        cli.kill()
        cli.wait()
        if server_pid is not None and not _exits(server_pid):
            os.kill(server_pid, signal.SIGKILL)
        os.close(log_fd)


def _exits(pid: int, guard_s: float = 0) -> bool:
    """`pid` has exited, or exits within `guard_s` (waits on a pidfd, without polling)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], guard_s)[0])
    finally:
        os.close(fd)


def _drain(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except BlockingIOError:
        return b""
