"""`toolagent info`: what a command here would use (version, store, server and engine configs, user)
and where each came from, without opening the store or starting a server."""

from __future__ import annotations

import os
from typing import Any

from .. import __version__
from ..errors import ToolAgentError
from ._app import app, emit_json, out, state, store_in_use


def _servers() -> dict[str, Any]:
    from ..mcp.config import ServersConfig, config_file

    origin_text = {
        "given": "--servers",
        "environment": "TOOLAGENT_MCP_CONFIG",
        "working directory": "./mcp.json in the working directory",
        "shipped": "the config shipped with toolagent; no ./mcp.json here",
    }
    try:
        path, origin = config_file(state.servers)
    except ToolAgentError as exc:
        return {"files": [], "from": None, "servers": [], "error": exc.message}
    shown = origin_text[origin]
    if origin == "given" and state.sources.get("servers") == "environment":
        shown = "TOOLAGENT_MCP_CONFIG"
    files = [os.path.abspath(f) for f in path.split(os.pathsep) if f]
    entry: dict[str, Any] = {"files": files, "from": shown}
    try:
        config = ServersConfig.load(state.servers)
    except ToolAgentError as exc:
        entry["servers"], entry["error"] = [], exc.message
    else:
        # With the files their `include` lists name.
        entry["files"] = [os.path.abspath(f) for f in config.files] or files
        entry["servers"] = sorted(config.enabled)
    return entry


def _engine() -> dict[str, Any]:
    from ..settings import Settings

    path = Settings.from_env().engine_config
    if not path:
        return {"file": None, "from": "the built-in defaults; TOOLAGENT_ENGINE_CONFIG names a YAML or JSON file"}
    return {"file": os.path.abspath(path), "from": "TOOLAGENT_ENGINE_CONFIG"}


def _user() -> dict[str, Any]:
    from ..engine.principals import local_user_name

    if state.user:
        return {"name": state.user, "from": "--user" if state.sources.get("user") == "flag" else "TOOLAGENT_USER"}
    return {"name": local_user_name(), "from": "the local user: your OS account, created on first use"}


@app.command("info")
def info() -> None:
    """The version, the store, the server and engine configs and the user in use, and where each came from."""
    url, origin = store_in_use()
    servers, engine, user = _servers(), _engine(), _user()
    report: dict[str, Any] = {
        "version": __version__,
        "store": {"url": url, "from": origin},
        "server_config": servers,
        "engine_config": engine,
        "user": user,
    }
    if state.json:
        emit_json(report)
        return
    error = str(servers.get("error", ""))
    lines = [
        ("version", __version__, ""),
        ("store", url, origin),
        ("server config", ", ".join(servers["files"]) or "none", servers["from"] or error),
        ("servers", ", ".join(servers["servers"]) or "none", error if servers["files"] else ""),
        ("engine config", engine["file"] or "defaults", engine["from"]),
        ("user", user["name"], user["from"]),
    ]
    width = max(len(label) for label, _, _ in lines)
    for label, value, where in lines:
        out.print(f"{label:<{width}}  {value}" + (f"  ({where})" if where else ""), markup=False)
