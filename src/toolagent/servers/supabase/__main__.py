"""Command line: serve the Supabase MCP server, or load the demo data into PostgreSQL.

    python -m toolagent.servers.supabase [--transport stdio|http] [--host H] [--port N]
    python -m toolagent.servers.supabase load-demo --db-url URL [--replace] [--reader-role R --reader-password P]

Configuration errors (e.g. the postgres backend without SUPABASE_DB_URL) are printed on
stderr and end the process with a non-zero status before anything is served.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ...errors import ToolAgentError

#: Port of the streamable HTTP transport unless --port is given.
DEFAULT_HTTP_PORT = 8765


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m toolagent.servers.supabase", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="serve MCP (the default)")
    for p in (parser, serve):
        p.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="stdio (default) or streamable HTTP")
        p.add_argument("--host", default="127.0.0.1", help="HTTP host (default 127.0.0.1)")
        p.add_argument("--port", type=int, default=DEFAULT_HTTP_PORT, help=f"HTTP port (default {DEFAULT_HTTP_PORT})")
    load = sub.add_parser("load-demo", help="create the demo tables and rows in a PostgreSQL database")
    load.add_argument("--db-url", default=os.environ.get("SUPABASE_DB_URL"), help="PostgreSQL URL (default: SUPABASE_DB_URL)")
    load.add_argument("--replace", action="store_true", help="drop existing demo tables first")
    load.add_argument("--reader-role", default="toolagent_reader",
                      help="read-only role to create for the server (default toolagent_reader; '' to skip)")
    load.add_argument("--reader-password", default=os.environ.get("SUPABASE_READER_PASSWORD"),
                      help="its password (default: SUPABASE_READER_PASSWORD)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "load-demo":
            from .demo_data import load_demo_data

            if not args.db_url:
                from ...errors import EnvVarMissing

                raise EnvVarMissing("SUPABASE_DB_URL")
            counts = load_demo_data(args.db_url, replace=args.replace, reader_role=args.reader_role or None,
                                    reader_password=args.reader_password)
            print(", ".join(f"{table}: {n} rows" for table, n in counts.items()))
            if args.reader_role:
                print(f"read-only role {args.reader_role}: point SUPABASE_DB_URL at it")
            return 0
        from .server import build_server
        from .settings import SupabaseSettings

        settings = SupabaseSettings.from_env(os.environ)
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
