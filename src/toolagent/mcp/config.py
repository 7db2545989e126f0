"""MCP server configuration in the `mcpServers` format MCP hosts already use.

```json
{"mcpServers": {
   "supabase": {"command": "python", "args": ["-m", "toolagent.servers.supabase"], "env": {}, "cwd": null,
                "timeout_s": 30, "connect_timeout_s": 20, "risk": "safe", "category": "database",
                "sql_tools": ["execute-sql"]},
   "remote":   {"url": "http://127.0.0.1:8765/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}
 },
 "connect_timeout_s": 60}
```

`${VAR}` anywhere in a string is replaced from the environment (a missing variable is an error
naming it; `${VAR:-default}` gives a default). A tool's namespace is its server's name.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..data import servers_file
from ..errors import EnvVarMissing, ServerConfigError
from ..settings import Settings
from ..settings import environ as settings_environ

#: Environment variable naming the config file.
CONFIG_ENV = "TOOLAGENT_MCP_CONFIG"
#: File read when neither `--servers` nor the variable is given.
DEFAULT_CONFIG_FILE = "mcp.json"
#: Risk levels an operator may assign.
Risk = Literal["safe", "moderate", "dangerous"]

# Names pydantic puts in an error's location for the union's branches: not part of the field path.
_KIND_LOCS = ("StdioServer", "HttpServer", "PythonServer", "stdio", "http", "python")
_PYTHON_TARGET = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_env(value: Any, *, where: str, environ: dict[str, str] | None = None) -> Any:
    """Replace `${VAR}` in every string of `value`.

    Raises:
        EnvVarMissing: a referenced variable is unset and has no default.
    """
    env = settings_environ() if environ is None else environ
    if isinstance(value, str):

        def sub(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if name in env:
                return env[name]
            if default is not None:
                return default
            raise EnvVarMissing(name, source=where)

        return _VAR.sub(sub, value)
    if isinstance(value, dict):
        return {k: expand_env(v, where=f"{where}.{k}", environ=environ) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_env(v, where=f"{where}[{i}]", environ=environ) for i, v in enumerate(value)]
    return value


class _ServerBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout_s: float | None = Field(default=None, gt=0, description="Default call timeout for this server's tools.")
    connect_timeout_s: float | None = Field(
        default=None,
        gt=0,
        description="How long starting the server and the MCP handshake may take (default: the file's "
        "top-level `connect_timeout_s`, else 60 s).",
    )
    tool_timeouts_s: dict[str, float] = Field(default_factory=dict, description="Per-tool timeouts, by tool name.")
    disabled: bool = Field(default=False, description="Skip this server entirely.")
    risk: Risk | dict[str, Risk] | None = Field(
        default=None, description="Risk of every tool (a string) or per tool name (a map)."
    )
    category: str | dict[str, str] | None = Field(
        default=None, description="Category of every tool (a string) or per tool name (a map)."
    )
    trusted: bool = Field(default=False, description="Trust this server's annotations when deciding risk.")
    sql_tools: list[str] = Field(
        default_factory=list, description="Tools whose `sql` argument the runner checks with the agent's SQL guard."
    )

    def risk_for(self, tool: str) -> str | None:
        """Operator-set risk of one tool."""
        return self.risk.get(tool) if isinstance(self.risk, dict) else self.risk

    def category_for(self, tool: str) -> str | None:
        """Operator-set category of one tool."""
        return self.category.get(tool) if isinstance(self.category, dict) else self.category

    def timeout_for(self, tool: str) -> float | None:
        """Per-tool timeout, else the server's."""
        return self.tool_timeouts_s.get(tool, self.timeout_s)


class StdioServer(_ServerBase):
    """A server started as a subprocess speaking MCP over stdin/stdout."""

    transport: Literal["stdio"] = "stdio"
    command: str = Field(min_length=1, description="Program to start; `python` means this interpreter.")
    args: list[str] = Field(default_factory=list, description="Its arguments.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables.")
    cwd: str | None = Field(default=None, description="Working directory.")

    @field_validator("command")
    @classmethod
    def _python_is_this_interpreter(cls, command: str) -> str:
        # Servers written in Python must run in the interpreter toolagent runs in, where the
        # package and its dependencies are installed, whatever `python` on PATH is.
        return sys.executable if command in ("python", "python3") else command


class HttpServer(_ServerBase):
    """A server reached over streamable HTTP."""

    transport: Literal["http"] = "http"
    url: str = Field(pattern=r"^https?://", description="Endpoint URL, e.g. http://127.0.0.1:8765/mcp.")
    headers: dict[str, str] = Field(default_factory=dict, description="Extra HTTP headers (e.g. Authorization).")


class PythonServer(_ServerBase):
    """Tools run in this process: `package.module:attr` names an `MCPServer`, a list of functions, or a
    function of no arguments returning either. Nothing is imported until a runtime opens.
    """

    transport: Literal["python"] = "python"
    python: str = Field(
        description="`package.module:attr`: an importable module (installed, or on PYTHONPATH) and a name in it."
    )

    @field_validator("python")
    @classmethod
    def _is_a_target(cls, target: str) -> str:
        if _PYTHON_TARGET.fullmatch(target) is None:
            raise ValueError(
                f"`python` must be `package.module:attr` (a dotted module path, a colon, a name in it), not {target!r}"
            )
        return target

    @model_validator(mode="after")
    def _no_connect_timeout(self) -> PythonServer:
        if self.connect_timeout_s is not None:
            raise ValueError("`connect_timeout_s` has no meaning for a `python` server (nothing connects): remove it")
        return self


ServerParams = StdioServer | HttpServer | PythonServer
_Server = Annotated[StdioServer | HttpServer | PythonServer, Field(discriminator="transport")]


class ServersConfig(BaseModel):
    """The whole file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mcpServers: dict[str, _Server] = Field(default_factory=dict, description="Servers by name (the namespace).")
    connect_timeout_s: float | None = Field(
        default=None, gt=0, description="Default `connect_timeout_s` of every server (else 60 s)."
    )

    @model_validator(mode="before")
    @classmethod
    def _pick_transport(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("mcpServers"), dict):
            servers = {}
            for name, raw in data["mcpServers"].items():
                if isinstance(raw, dict) and "transport" not in raw:
                    if "url" in raw:
                        raw = {**raw, "transport": "http"}
                    elif "command" in raw:
                        raw = {**raw, "transport": "stdio"}
                    elif "python" in raw:
                        raw = {**raw, "transport": "python"}
                    else:
                        raise ValueError(
                            f"server '{name}' needs `command` (stdio), `url` (streamable HTTP) "
                            "or `python` (`package.module:attr`, run in process)"
                        )
                servers[name] = raw
            data = {**data, "mcpServers": servers}
        return data

    @field_validator("mcpServers")
    @classmethod
    def _names_are_namespaces(cls, servers: dict[str, ServerParams]) -> dict[str, ServerParams]:
        for name in servers:
            if not name or "/" in name or name.strip() != name:
                raise ValueError(f"server name {name!r} cannot be a namespace: no '/', no surrounding spaces")
        return servers

    @property
    def enabled(self) -> dict[str, ServerParams]:
        """Servers not marked disabled."""
        return {k: v for k, v in self.mcpServers.items() if not v.disabled}

    @classmethod
    def from_data(cls, data: Any, *, source: str = "<config>", environ: dict[str, str] | None = None) -> ServersConfig:
        """Validate parsed JSON, expanding `${VAR}` first.

        Raises:
            ServerConfigError: with the field path and what to change.
            EnvVarMissing: a referenced variable is not set.
        """
        data = expand_env(data, where=source, environ=environ)
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            path = ".".join(str(p) for p in first["loc"] if p not in _KIND_LOCS)
            raise ServerConfigError(first["msg"], source=source, path=path or None) from exc

    @classmethod
    def load(cls, path: str | None = None) -> ServersConfig:
        """Read `path`, else `TOOLAGENT_MCP_CONFIG`, else `./mcp.json`, else the one shipped in the package.

        Raises:
            ServerConfigError: unreadable or invalid file.
        """
        chosen = path or Settings.from_env().mcp_config
        if chosen is None:
            candidates = [Path(DEFAULT_CONFIG_FILE), servers_file()]
            found = next((c for c in candidates if c.is_file()), None)
            if found is None:
                raise ServerConfigError(
                    f"no MCP server config: create {DEFAULT_CONFIG_FILE} or pass --servers FILE (or set {CONFIG_ENV})"
                )
            chosen = str(found)
        try:
            text = Path(chosen).read_text(encoding="utf-8")
        except OSError as exc:
            raise ServerConfigError(f"cannot read MCP server config: {exc.strerror or exc}", source=chosen) from exc
        except UnicodeDecodeError as exc:
            raise ServerConfigError(
                f"MCP server config is not UTF-8 text (byte {exc.start}): save it as UTF-8", source=chosen
            ) from exc
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ServerConfigError(
                f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}", source=chosen
            ) from exc
        config = cls.from_data(data, source=chosen)
        base = Path(chosen).resolve().parent
        return config.model_copy(
            update={"mcpServers": {k: _resolve_cwd(v, base) for k, v in config.mcpServers.items()}}
        )


def _resolve_cwd(server: ServerParams, base: Path) -> ServerParams:
    # A relative cwd is relative to the config file, not to wherever toolagent was started.
    if isinstance(server, StdioServer) and server.cwd and not Path(server.cwd).is_absolute():
        return server.model_copy(update={"cwd": str(base / server.cwd)})
    return server
