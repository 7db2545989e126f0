"""Command line: serve the Supabase MCP server, or load the demo data into PostgreSQL.

    python -m toolagent.servers.supabase [--transport stdio|http] [--host H] [--port N]
    python -m toolagent.servers.supabase load-demo --db-url URL [--replace] [--reader-role R --reader-password P]

Configuration errors (e.g. the postgres backend without SUPABASE_DB_URL) are printed on
stderr and end the process with a non-zero status before anything is served.

Over stdio the server exits as soon as its stdin is closed (its client went away, even by
SIGKILL), also while a call is still running: nobody is left to read the answer.
"""

from __future__ import annotations

import argparse
import os
import select
import stat
import sys
import threading
import time
from collections.abc import Sequence

from ...errors import ToolAgentError

#: Port of the streamable HTTP transport unless --port is given.
DEFAULT_HTTP_PORT = 8765
#: Time the server gets to finish on its own after its stdin closed (a client closing normally
#: closes stdin first and waits for the exit).
STDIN_CLOSED_GRACE_S = 1.0


def exit_when_stdin_closes(grace_s: float = STDIN_CLOSED_GRACE_S) -> threading.Thread | None:
    """Start a daemon thread that ends the process once stdin's writer is gone.

    The SDK notices end of input only when its reader gets to it, and waits for running calls
    (an LLM request may take a minute) before returning; a killed client would leave the server
    running that long. Polling for POLLHUP with no other events reads nothing, so the SDK's
    reader is undisturbed. Only pipes and sockets are watched (a terminal or file never hangs up).

    Returns:
        The thread, or None when stdin is not a pipe or socket.
    """
    try:
        mode = os.fstat(0).st_mode
    except OSError:
        return None
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return None

    # The SDK moves the pipe to another descriptor and points 0 at /dev/null once it serves;
    # a duplicate keeps watching the pipe itself.
    watched = os.dup(0)

    def watch() -> None:
        poller = select.poll()
        poller.register(watched, 0)  # no events asked: only POLLHUP/POLLERR/POLLNVAL are reported
        while True:
            events = poller.poll(None)
            if any(ev & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _, ev in events):
                break
        time.sleep(grace_s)
        os._exit(0)

    thread = threading.Thread(target=watch, name="stdin-watch", daemon=True)
    thread.start()
    return thread


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m toolagent.servers.supabase", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="serve MCP (the default)")
    for p in (parser, serve):
        p.add_argument(
            "--transport", choices=["stdio", "http"], default="stdio", help="stdio (default) or streamable HTTP"
        )
        p.add_argument("--host", default="127.0.0.1", help="HTTP host (default 127.0.0.1)")
        p.add_argument("--port", type=int, default=DEFAULT_HTTP_PORT, help=f"HTTP port (default {DEFAULT_HTTP_PORT})")
    load = sub.add_parser("load-demo", help="create the demo tables and rows in a PostgreSQL database")
    load.add_argument("--db-url", default=None, help="PostgreSQL URL (default: SUPABASE_DB_URL)")
    load.add_argument("--replace", action="store_true", help="drop existing demo tables first")
    load.add_argument(
        "--reader-role",
        default="toolagent_reader",
        help="read-only role to create for the server (default toolagent_reader; '' to skip)",
    )
    load.add_argument("--reader-password", default=None, help="its password (default: SUPABASE_READER_PASSWORD)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.command != "load-demo" and args.transport == "stdio":
        exit_when_stdin_closes()
    try:
        if args.command == "load-demo":
            from .demo_data import load_demo_data

            if not args.db_url:
                from .settings import SupabaseSettings

                configured = SupabaseSettings.from_env().db_url
                args.db_url = configured.get_secret_value() if configured is not None else None
            if not args.db_url:
                from ...errors import EnvVarMissing

                raise EnvVarMissing("SUPABASE_DB_URL")
            if args.reader_password is None:
                from .settings import SupabaseSettings

                secret = SupabaseSettings.from_env().reader_password
                args.reader_password = secret.get_secret_value() if secret is not None else None
            counts = load_demo_data(
                args.db_url,
                replace=args.replace,
                reader_role=args.reader_role or None,
                reader_password=args.reader_password,
            )
            print(", ".join(f"{table}: {n} rows" for table, n in counts.items()))
            if args.reader_role:
                print(f"read-only role {args.reader_role}: point SUPABASE_DB_URL at it")
            return 0
        from .server import build_server
        from .settings import SupabaseSettings

        settings = SupabaseSettings.from_env()
        settings.check()
        # Over HTTP, INFO makes uvicorn say where it listens ("Uvicorn running on ...").
        server = build_server(settings, log_level="INFO" if args.transport == "http" else "WARNING")
    except ToolAgentError as exc:
        print(exc.message, file=sys.stderr)
        return exc.exit_code
    if args.transport == "http":
        server.run("streamable-http", host=args.host, port=args.port)
    else:
        server.run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
