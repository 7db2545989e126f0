"""Stdio server processes: they die with the process that started them, and one left busy in an
abandoned call is stopped shortly after its connection closes (Linux).

**Parent death.** The SDK starts each stdio server in a session of its own (so that closing the
connection can stop its whole process tree), which also means a `kill -9` of our process reaches
none of them: an orphaned server went on running its abandoned call for as long as the call took.
On Linux the server is started through a few-line launcher that asks the kernel for `SIGKILL` when
its parent dies (`prctl(PR_SET_PDEATHSIG)`, which survives the `exec` of the server itself),
checks that the parent did not die before the request took hold, writes its process id where
`connect` reads it, and then `exec`s the server: same process id, same session, same pipes, about
one interpreter start (tens of milliseconds) more per server start. The kernel sends the signal
when the *thread* that started the child ends; servers are started from the event loop's thread,
which lives as long as their connections.

**Abandoned calls.** Closing a connection closes the server's stdin and the SDK then waits 2 s for
the server to exit, sends `SIGTERM` to its process group, and waits 2 s more before `SIGKILL`. A
server that ignores a call's cancellation is usually still busy in it, so a CLI whose call timed
out printed its error at the deadline and exited seconds later. When a connection with an
abandoned call (timed out or cancelled before its answer) closes, the server gets
`ABANDONED_GRACE_S` after its stdin closed, then `SIGTERM` to its process group, and as long again
before `SIGKILL`; a server that exits by itself is not signalled.

Elsewhere (macOS, Windows) the command is left as it is and the SDK's own escalation applies: an
orphaned server sees its stdin close and exits when it next reads it (the SDK's servers do; one
busy in a call finishes it first). A command that cannot be found is left as it is too, so the
SDK reports it as it always has.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
from pathlib import Path

import anyio
from mcp.client.stdio import get_default_environment

#: Runs in the child before the server: die with the parent, tell the parent our pid, become the server.
LAUNCHER = (
    "import ctypes, os, sys\n"
    "if ctypes.CDLL(None, use_errno=True).prctl(1, int(sys.argv[1])) != 0:\n"  # 1: PR_SET_PDEATHSIG
    "    sys.exit('cannot ask for the parent-death signal: ' + os.strerror(ctypes.get_errno()))\n"
    "if os.getppid() != int(sys.argv[2]):\n"  # the parent died before the request took hold
    "    os._exit(1)\n"
    "with open(sys.argv[3], 'w') as f:\n"
    "    f.write(str(os.getpid()))\n"
    "os.execvp(sys.argv[4], sys.argv[4:])\n"
)
#: The signal a server gets when its parent dies: nothing is left to read its answers.
PARENT_DEATH_SIGNAL = signal.SIGKILL
#: How long a server with an abandoned call may take to exit after its stdin closed, before
#: `SIGTERM`, and then before `SIGKILL`.
ABANDONED_GRACE_S = 0.1


def supported() -> bool:
    """This platform has the parent-death signal."""
    return sys.platform.startswith("linux")


def _found(command: str, env: dict[str, str] | None, cwd: str | None) -> bool:
    if os.sep in command:
        return os.access(os.path.join(cwd or os.curdir, command), os.X_OK)
    path = (get_default_environment() | (env or {})).get("PATH")
    return shutil.which(command, path=path) is not None


def guarded(
    command: str, args: list[str], *, env: dict[str, str] | None, cwd: str | None, pid_file: Path
) -> tuple[str, list[str]] | None:
    """The `(command, args)` that start the server so that it dies with this process and writes its
    process id to `pid_file`; None where that is not possible (not Linux, or the program is not
    found), so the server is started as configured.

    Args:
        command: the server's program.
        args: its arguments.
        env: the extra environment it is started with (for the `PATH` the program is found on).
        cwd: its working directory.
        pid_file: where the launcher writes the server's process id.
    """
    if not supported() or not _found(command, env, cwd):
        return None
    signal_number = str(int(PARENT_DEATH_SIGNAL))
    return sys.executable, ["-S", "-I", "-c", LAUNCHER, signal_number, str(os.getpid()), str(pid_file), command, *args]


def read_pid(pid_file: Path) -> int | None:
    """The process id the launcher wrote (it did, before the server it became could answer)."""
    try:
        return int(pid_file.read_text())
    except (OSError, ValueError):
        return None


async def stop_after_grace(pid: int, grace_s: float = ABANDONED_GRACE_S) -> None:
    """`SIGTERM`, then `SIGKILL`, to the server's process group (its pid: it leads a session of
    its own), each after `grace_s`; cancelled by the caller as soon as the server has exited."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        await anyio.sleep(grace_s)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)


__all__ = [
    "ABANDONED_GRACE_S",
    "LAUNCHER",
    "PARENT_DEATH_SIGNAL",
    "guarded",
    "read_pid",
    "stop_after_grace",
    "supported",
]
