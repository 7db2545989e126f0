"""`toolagent supabase install-functions`: the SQL functions the Supabase server's `supabase`
backend calls over PostgREST's RPC endpoint, installed into a project or printed for its SQL editor."""

from __future__ import annotations

import typer

from ._app import COMMANDS, EXIT_USAGE, app, emit_json, fail, out, state

supabase_app = typer.Typer(help=COMMANDS["supabase"][1], no_args_is_help=True)
app.add_typer(supabase_app, name="supabase")


@supabase_app.command("install-functions")
def install_functions(
    db_url: str | None = typer.Option(
        None, "--db-url", help="PostgreSQL URL of a role that may create functions (default: SUPABASE_DB_URL)."
    ),
    reader_role: str = typer.Option(
        "service_role",
        "--reader-role",
        help="The only role granted EXECUTE: the role of the key's JWT (service_role, or your reader role).",
    ),
    statement_timeout_ms: int = typer.Option(
        15_000, "--statement-timeout-ms", min=1, help="The functions' statement timeout, applied by PostgREST."
    ),
    print_sql: bool = typer.Option(
        False, "--print", help="Print the SQL (for the Supabase SQL editor) instead of connecting."
    ),
) -> None:
    """Create or update the two read-only functions the supabase backend calls; safe to run again.

    EXECUTE goes to --reader-role only, never to anon or PUBLIC. Installing a version older
    than the one installed is refused.

    Example: toolagent supabase install-functions --db-url postgresql://postgres:PASSWORD@db.REF.supabase.co:5432/postgres
    """
    from ..errors import ToolAgentError
    from ..servers.supabase.functions import FUNCTIONS_VERSION, check_role, functions_sql
    from ..servers.supabase.functions import install_functions as install

    try:
        check_role(reader_role)
        if print_sql:
            print(functions_sql(reader_role, statement_timeout_ms), end="")
            return
        if not db_url:
            from ..servers.supabase.settings import SupabaseSettings

            configured = SupabaseSettings.from_env().db_url
            db_url = configured.get_secret_value() if configured is not None else None
        if not db_url:
            raise fail(
                "--db-url is required (or SUPABASE_DB_URL): the project's connection string, "
                "or use --print and paste the SQL into the SQL editor",
                EXIT_USAGE,
            )
        result = install(db_url, reader_role=reader_role, statement_timeout_ms=statement_timeout_ms)
    except ValueError as exc:
        raise fail(f"--reader-role: {exc}", EXIT_USAGE) from exc
    except ToolAgentError as exc:
        raise fail(exc.message, exc.exit_code) from exc
    if state.json:
        emit_json(
            {
                "version": result.version,
                "previous_version": result.previous_version,
                "reader_role": result.reader_role,
                "created_role": result.created_role,
            }
        )
        return
    before = "new" if result.previous_version is None else f"was v{result.previous_version}"
    created = f" (created role {result.reader_role}, NOLOGIN)" if result.created_role else ""
    out.print(
        f"installed toolagent_schema and toolagent_exec_sql v{FUNCTIONS_VERSION} ({before}), "
        f"EXECUTE granted to {result.reader_role} only{created}",
        markup=False,
    )
