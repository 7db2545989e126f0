"""`toolagent serve`: the HTTP API, in one process or in `--workers N` processes sharing the port.

With several workers each process has its own store connections, its own MCP server sessions
(stdio servers are started once per worker), its own cache of API keys and its own event bus.
What they share goes through the store: rate limits and budgets stay exact, a revoked key is
refused by every worker at once, a cancel reaches an execution running in another worker through
the store (within the engine's `cancel_poll_ms`), and a run's event stream served by a worker
other than the one running it follows the stored steps instead of the live bus. On SQLite the
workers take turns at its single writer, so writes do not scale with them; on PostgreSQL they do.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

import typer

from ..engine.logs import configure_logging
from ..mcp.config import ServersConfig
from ._app import EXIT_NO_LISTEN, EXIT_USAGE, app, err, fail, run, state, store_in_use

if TYPE_CHECKING:
    from types import FrameType

    import uvicorn


def ensure_can_listen(host: str, port: int) -> None:
    """Exit with EXIT_NO_LISTEN (3) when `host:port` cannot be bound (in use, not permitted), before
    any banner or server start-up, so a script can tell it from a configuration error (2)."""
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        fail(f"--host {host}: {exc.strerror}", EXIT_USAGE)
    with socket.socket(family, kind, proto) as sock:
        # The same option uvicorn sets, so a port in TIME_WAIT after a restart is not refused here.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            fail(
                f"cannot listen on {host}:{port}: {exc.strerror}; stop whatever uses it or pass another --port",
                EXIT_NO_LISTEN,
            )


def _store_line() -> str:
    url, origin = store_in_use()
    return f"store: {url} ({origin})"


@app.command("serve")
def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on."),
    port: int = typer.Option(8080, "--port", min=1, max=65535, help="TCP port."),
    log_level: str = typer.Option("info", "--log-level", help="uvicorn log level."),
    submit: bool = typer.Option(
        False,
        "--submit",
        help="Queue BUILD runs for `toolagent worker` (PostgreSQL) "
        "instead of running them in this process (also: TOOLAGENT_EXECUTION=queue).",
    ),
    workers: int = typer.Option(
        1,
        "--workers",
        min=1,
        max=64,
        help="Server processes sharing the port, each with "
        "its own MCP server sessions (see the README: what changes with several).",
    ),
) -> None:
    """Serve the HTTP API (OpenAPI at /openapi.json, docs at /docs) with the CLI's store and servers.

    SIGTERM (or Ctrl-C) stops taking connections, waits for open requests to end, cancels the BUILD
    runs running in this process and stops the MCP servers; SIGTERM then exits 0."""
    termination = _Termination()
    signal.signal(signal.SIGTERM, termination)
    ensure_can_listen(host, port)
    import uvicorn

    from ..api.app import create_app

    # A server has no terminal to report to: its denied and failed executions are logged (warning),
    # whatever the CLI's quieter default.
    configure_logging(level="DEBUG" if state.debug else None, lifecycle=True)
    state.logging_ready = True

    if submit:
        from ..errors import UsageError
        from ..store.db import default_url, normalize_url
        from ..workers.dispatch import Dispatcher

        try:  # refused here, before the banner; the app decides again, once, when it starts
            Dispatcher.decide(submit=True, sqlite=normalize_url(state.db or default_url()).startswith("sqlite"))
        except UsageError as exc:
            fail(exc.message, EXIT_USAGE)

    if workers > 1:
        _serve_workers(host, port, log_level, workers, submit)
        return

    async def body() -> None:
        config = ServersConfig.load(state.servers)
        err.print(f"toolagent API on http://{host}:{port} (servers: {', '.join(config.enabled) or 'none'})")
        err.print(_store_line(), markup=False)
        api = create_app(db=state.db, servers=config, submit=submit)
        api.state.freeze_heap = True  # this process is the server's own (`toolagent._heap`)
        server = uvicorn.Server(uvicorn.Config(api, host=host, port=port, log_level=log_level))
        termination.server = server
        await server.serve()

    run(body)


class _Termination:
    """SIGTERM for `serve`, from the command's start. Before the server runs nothing is open: exit 0
    at once (a container's process 1 ignores a signal it has no handler for, so one sent during the
    start was lost). While it runs, uvicorn's own handler (which replaces this one) shuts it down;
    it then restores this handler and raises the signal again, to end the process the default way
    (exit 143), and this handler lets the command end normally instead: a requested stop exits 0."""

    def __init__(self) -> None:
        self.server: uvicorn.Server | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.server is None:
            raise SystemExit(0)
        self.server.handle_exit(signum, frame)  # after its shutdown this changes nothing


def _serve_workers(host: str, port: int, log_level: str, workers: int, submit: bool) -> None:
    """uvicorn's process manager over `worker_app`: the options reach the workers (spawned, not
    forked) through the environment they inherit."""
    import uvicorn

    from ..settings import export_for_children

    config = ServersConfig.load(state.servers)  # fails here, once, on a bad config
    export_for_children(
        database_url=state.db or None,
        mcp_config=str(state.servers) if state.servers else None,
        execution="queue" if submit else None,
        log_level="DEBUG" if state.debug else None,
    )
    err.print(
        f"toolagent API on http://{host}:{port}, {workers} workers (servers: {', '.join(config.enabled) or 'none'})"
    )
    err.print(_store_line(), markup=False)
    uvicorn.run(
        "toolagent.cli.serve:worker_app", factory=True, host=host, port=port, workers=workers, log_level=log_level
    )


def worker_app() -> object:
    """The app of one `--workers` process, configured from the environment `serve` set."""
    from ..api.app import create_app

    configure_logging(lifecycle=True)
    # `--submit` reaches this process as TOOLAGENT_EXECUTION=queue, which the app reads.
    api = create_app(servers=ServersConfig.load())
    api.state.freeze_heap = True
    return api
