"""Who runs something: the process id, host name and boot id stored with running executions and
runs, so that another process can tell a record whose process is certainly gone from one still
being worked on."""

from __future__ import annotations

import functools
import os
import socket
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Owner:
    """The process running an execution."""

    pid: int
    """Process id."""
    host: str
    """Host name."""
    boot: str
    """The kernel's boot id (`/proc/sys/kernel/random/boot_id`); empty where there is none."""

    @classmethod
    def current(cls) -> Owner:
        """This process."""
        return cls(os.getpid(), socket.gethostname(), boot_id())


@functools.cache
def boot_id() -> str:
    """The kernel's boot id: changes on every reboot (empty when the system has none). Read once:
    a process does not outlive its boot, and every run records it."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        return ""


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists on this host (a zombie counts as existing)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    except OSError:
        return False
    return True


def gone(pid: int | None, host: str | None, boot: str | None, me: Owner) -> str | None:
    """Why the process `(pid, host, boot)` is certainly gone, seen from `me`; None when it may live.

    Only a process on this host can be checked: one of an earlier boot of this host, or one that no
    longer exists. Another host's process, or an unknown owner, may still be running.
    """
    if pid is None or host != me.host:
        return None
    if me.boot and boot and boot != me.boot:
        return f"host {me.host} restarted since process {pid} started it"
    if pid != me.pid and not pid_alive(pid):
        return f"process {pid} on {me.host} ended before it finished"
    return None


__all__ = ["Owner", "boot_id", "gone", "pid_alive"]
