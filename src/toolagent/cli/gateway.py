"""`toolagent gateway`: the governed tools as one MCP server over stdio, and the names it gives them.

Over HTTP the gateway is part of `toolagent serve` (at `/mcp`); see the manual's gateway page.
"""

from __future__ import annotations

import typer

from ..mcp.config import ServersConfig
from ._app import app, emit_json, err, fail, out, run, state

gateway_app = typer.Typer(
    help=(
        "Serve the governed tools to an MCP client over stdio, or print their gateway names. "
        "Over HTTP, `toolagent serve` serves the same at /mcp."
    ),
    invoke_without_command=True,
)
app.add_typer(gateway_app, name="gateway")


@gateway_app.callback()
def gateway(
    ctx: typer.Context,
    stdio: bool = typer.Option(
        False, "--stdio", help="Serve MCP on stdin/stdout, acting as --user (default: the local user)."
    ),
) -> None:
    """Serve the governed tools to an MCP client over stdio, or print their gateway names."""
    if ctx.invoked_subcommand is not None:
        return
    if not stdio:
        fail("say how to serve: `toolagent gateway --stdio` (HTTP: `toolagent serve` serves /mcp)", 2)

    async def body() -> None:
        from ..gateway.stdio import serve_stdio, stdio_gateway
        from .tools import cli_runtime

        async with cli_runtime(ServersConfig.load(state.servers)) as (runtime, me):
            gateway = stdio_gateway(runtime, me)
            names = await gateway.refresh()  # a name collision fails here, before any client connects
            err.print(f"toolagent MCP gateway on stdio as {me.name} ({me.level}), {len(names)} tools", markup=False)
            await serve_stdio(gateway)

    run(body)


@gateway_app.command("tools")
def tools() -> None:
    """Print each tool's gateway name and the `namespace/tool` it stands for (every tool, whoever may run it)."""

    async def body() -> None:
        from ..gateway.server import tool_annotations
        from ..gateway.stdio import stdio_gateway
        from .tools import cli_runtime

        async with cli_runtime(ServersConfig.load(state.servers)) as (runtime, me):
            names = await stdio_gateway(runtime, me).refresh()
            rows: list[dict[str, str | bool | None]] = []
            for qualified, name in sorted(names.to_gateway.items(), key=lambda kv: kv[1]):
                entry = runtime.catalogue.get(qualified)
                hints = tool_annotations(entry) if entry is not None else None
                rows.append(
                    {
                        "name": name,
                        "tool": qualified,
                        "risk": entry.risk if entry else None,
                        "readOnly": hints.read_only_hint if hints else None,
                        "destructive": hints.destructive_hint if hints else None,
                    }
                )
        if state.json:
            emit_json(rows)
            return
        width = max((len(str(r["name"])) for r in rows), default=4)
        for r in rows:
            out.print(f"{r['name']:<{width}}  {r['tool']}  ({r['risk']})", markup=False, highlight=False)

    run(body)
