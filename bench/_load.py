"""Load phases of bench/api_load.py: N client tasks calling in a loop for a while, their latencies,
errors and CPU use, and the HTTP client pools they call through."""

from __future__ import annotations

import collections
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import anyio
import httpx
from _processes import cpu_s

#: Clients of a warm-up: enough to warm caches and the session; more would only queue (1,000 calls
#: queued behind a slow server make a "1 s" warm-up last as long as the phase).
WARMUP_CLIENTS = 100
#: Connections per httpx client (see `http_pools`).
CONNECTIONS_PER_CLIENT = 10
#: Client-side timeout: long, so that queueing in the server shows as latency, not as errors.
CLIENT_TIMEOUT_S = 120.0
#: How long an idle pooled connection is reused: below uvicorn's keep-alive timeout (5 s), so the
#: client never sends on a connection the server may be closing at that moment (httpx's default
#: expiry is the same 5 s: the two race, and a request lost that way is an httpx `ReadError`).
KEEPALIVE_EXPIRY_S = 2.0


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))] if ordered else float("nan")


@dataclass
class Phase:
    """What one load phase measured."""

    label: str
    """`API`, `direct`, `warmup`, ..."""
    clients: int
    """Concurrent clients."""
    latencies_s: list[float] = field(default_factory=list)
    """One per finished call, failed ones included."""
    errors: collections.Counter[str] = field(default_factory=collections.Counter)
    """Failed calls by kind."""
    elapsed_s: float = 0.0
    """From the start until the last call ended."""
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds used meanwhile, per process."""
    notes: list[str] = field(default_factory=list)
    """Extra lines to print."""

    @property
    def calls(self) -> int:
        """Calls finished, failed ones included."""
        return len(self.latencies_s)

    @property
    def per_s(self) -> float:
        """Successful calls per second."""
        return (self.calls - sum(self.errors.values())) / self.elapsed_s if self.elapsed_s else 0.0

    def print(self) -> None:
        """One line of figures, then CPU use and any errors."""
        ms = [v * 1000 for v in self.latencies_s]
        print(
            f"  {self.label:<7} N={self.clients:<5} {self.per_s:8.0f} calls/s  p50 {pct(ms, 0.5):8.1f} ms  "
            f"p95 {pct(ms, 0.95):8.1f} ms  p99 {pct(ms, 0.99):8.1f} ms  calls {self.calls:6d} in {self.elapsed_s:5.1f} s  "
            f"errors {sum(self.errors.values())}"
        )
        if self.cpu:
            per_call = {k: v / self.calls * 1000 for k, v in self.cpu.items()} if self.calls else {}
            print(
                "          cpu s: "
                + ", ".join(f"{k} {v:.1f} ({per_call.get(k, 0):.2f} ms/call)" for k, v in self.cpu.items())
            )
        for note in self.notes:
            print(f"          {note}")
        for kind, count in self.errors.most_common(5):
            print(f"          error x{count}: {kind}")


#: One call by client number i: None on success, else an error label.
Call = Callable[[int], Awaitable[str | None]]


async def hammer(phase: Phase, call: Call, seconds: float, procs: dict[str, int]) -> Phase:
    """N tasks each calling `call` in a loop until `seconds` pass; calls started by then are waited for.

    `call` returns None on success, else an error label; exceptions are counted by type.
    """
    before = {k: cpu_s(pid) for k, pid in procs.items()}
    here = time.process_time()
    deadline = time.perf_counter() + seconds

    async def client(i: int) -> None:
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            try:
                error = await call(i)
            except Exception as exc:  # noqa: BLE001 - a load test counts failures, it does not stop on them
                error = f"{type(exc).__name__}: {str(exc)[:120]}"
            phase.latencies_s.append(time.perf_counter() - t0)
            if error is not None:
                phase.errors[error] += 1

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(phase.clients):
            tg.start_soon(client, i)
    phase.elapsed_s = time.perf_counter() - start
    phase.cpu = {"bench(client)": time.process_time() - here, **{k: cpu_s(pid) - before[k] for k, pid in procs.items()}}
    return phase


@contextlib.asynccontextmanager
async def http_pools(url: str, headers: dict[str, str], clients: int) -> AsyncIterator[list[httpx.AsyncClient]]:
    """HTTP clients with a connection per concurrent client, at most CONNECTIONS_PER_CLIENT each.

    Measured here against a server that queues: one httpx pool of 100 or 1,000 connections costs
    the load generator 10-15 ms of CPU per call (httpcore re-scans its connections and waiting
    requests on every request event), which on a 2-core machine takes CPU from the server being
    measured; pools of 10 cost ~2 ms.
    """
    async with contextlib.AsyncExitStack() as stack:
        pools = []
        for first in range(0, clients, CONNECTIONS_PER_CLIENT):
            size = min(CONNECTIONS_PER_CLIENT, clients - first)
            limits = httpx.Limits(
                max_connections=size, max_keepalive_connections=size, keepalive_expiry=KEEPALIVE_EXPIRY_S
            )
            pools.append(
                await stack.enter_async_context(
                    httpx.AsyncClient(
                        base_url=url, headers=headers, limits=limits, timeout=httpx.Timeout(CLIENT_TIMEOUT_S)
                    )
                )
            )
        yield pools
