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
naming it; `${VAR:-default}` gives a default). `${file:PATH}` is replaced by the contents of a
file (relative to the config file; one trailing newline dropped) and `${secret:NAME}` by the file
NAME in the secrets directory: the top-level `secrets_dir`, else `/run/secrets`, where Docker
mounts secrets (Kubernetes mounts a Secret wherever its volume says: set `secrets_dir` to that).
A missing secret is an error naming it when the config loads, never later; secret values are
kept in memory only (no store row, log line, `repr` or error message holds them).
A tool's namespace is its server's name.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

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
#: Where `${secret:NAME}` looks when the config sets no `secrets_dir` (Docker's mount point).
DEFAULT_SECRETS_DIR = "/run/secrets"

# One pass over each string, so a value substituted in (an environment variable holding
# `${file:/etc/shadow}`, say) is never expanded again.
_REF = re.compile(
    r"\$\{(?:(?P<kind>file|secret):(?P<target>[^}]*?)|(?P<name>[A-Za-z_][A-Za-z0-9_]*))(?::-(?P<default>[^}]*))?\}"
)


def expand_env(
    value: Any,
    *,
    where: str,
    environ: dict[str, str] | None = None,
    base: Path | None = None,
    secrets_dir: str | None = None,
) -> Any:
    """Replace `${VAR}`, `${file:PATH}` and `${secret:NAME}` in every string of `value`.

    Args:
        value: parsed JSON.
        where: its path, for messages.
        environ: the variables (default: the process environment).
        base: the folder a relative `${file:PATH}` is relative to (default: the working directory).
        secrets_dir: the folder of `${secret:NAME}` (default `DEFAULT_SECRETS_DIR`).

    Raises:
        EnvVarMissing: a referenced variable is unset and has no default.
        ServerConfigError: a referenced secret file is missing or unreadable (naming it, not its value).
    """
    env = settings_environ() if environ is None else environ
    if isinstance(value, str):

        def sub(m: re.Match[str]) -> str:
            name, default, kind = m.group("name"), m.group("default"), m.group("kind")
            if kind is not None:
                return _read_secret(kind, m.group("target"), default, where=where, base=base, secrets_dir=secrets_dir)
            if name in env:
                return env[name]
            if default is not None:
                return default
            raise EnvVarMissing(name, source=where)

        return _REF.sub(sub, value)
    kw: dict[str, Any] = {"environ": environ, "base": base, "secrets_dir": secrets_dir}
    if isinstance(value, dict):
        return {k: expand_env(v, where=f"{where}.{k}", **kw) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_env(v, where=f"{where}[{i}]", **kw) for i, v in enumerate(value)]
    return value


def _read_secret(
    kind: str, target: str, default: str | None, *, where: str, base: Path | None, secrets_dir: str | None
) -> str:
    """The contents of a `${file:PATH}` or `${secret:NAME}` reference, without one trailing newline."""
    target = target.strip()
    if kind == "secret":
        if not target or "/" in target or "\\" in target or target in (".", ".."):
            raise ServerConfigError(
                f"${{secret:{target}}} must name a file in the secrets directory (no '/')", source=where
            )
        path = Path(secrets_dir or DEFAULT_SECRETS_DIR) / target
    else:
        if not target:
            raise ServerConfigError("${file:} needs a path, e.g. ${file:/run/secrets/token}", source=where)
        path = Path(target).expanduser()
        if not path.is_absolute() and base is not None:
            path = base / path
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if default is not None:
            return default
        what = f"secret '{target}'" if kind == "secret" else "secret file"
        raise ServerConfigError(
            f"{what} {path} does not exist: create or mount it"
            + (" (or set secrets_dir to where your secrets are mounted)" if kind == "secret" else ""),
            source=where,
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise ServerConfigError(f"secret file {path} cannot be read: {reason}", source=where) from None
    return text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text


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
    env: dict[str, str] = Field(default_factory=dict, repr=False, description="Extra environment variables.")
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
    headers: dict[str, str] = Field(
        default_factory=dict, repr=False, description="Extra HTTP headers (e.g. Authorization)."
    )


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
    include: list[str] = Field(
        default_factory=list,
        description="Other server config files whose servers join this file's (paths relative to this file); "
        "a server name defined twice is an error naming both files.",
    )
    secrets_dir: str | None = Field(
        default=None,
        description=f"The folder `${{secret:NAME}}` reads NAME from (default {DEFAULT_SECRETS_DIR}); relative to this file.",
    )
    _files: dict[str, str] = PrivateAttr(default_factory=dict)
    """The file each server was read from (empty for a config not read from files)."""

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
    def from_data(
        cls, data: Any, *, source: str = "<config>", environ: dict[str, str] | None = None, base: Path | None = None
    ) -> ServersConfig:
        """Validate parsed JSON, expanding `${VAR}`, `${file:PATH}` and `${secret:NAME}` first.

        Args:
            data: the parsed file.
            source: its name, for messages.
            environ: the variables (default: the process environment).
            base: the folder relative paths are relative to (the config file's).

        Raises:
            ServerConfigError: with the field path and what to change (a missing secret named).
            EnvVarMissing: a referenced variable is not set.
        """
        secrets_dir = None
        if isinstance(data, dict) and isinstance(data.get("secrets_dir"), str):
            secrets_dir = expand_env(data["secrets_dir"], where=f"{source}: secrets_dir", environ=environ, base=base)
            if base is not None and not Path(secrets_dir).is_absolute():
                secrets_dir = str(base / secrets_dir)
        data = expand_env(data, where=source, environ=environ, base=base, secrets_dir=secrets_dir)
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            path = ".".join(str(p) for p in first["loc"] if p not in _KIND_LOCS)
            raise ServerConfigError(first["msg"], source=source, path=path or None) from exc

    @property
    def files(self) -> list[str]:
        """The files this config was read from, in reading order (none when not read from files)."""
        return list(dict.fromkeys(self._files.values()))

    def file_of(self, server: str) -> str | None:
        """The file `server` was defined in."""
        return self._files.get(server)

    @classmethod
    def load(cls, path: str | None = None) -> ServersConfig:
        """Read `path`, else `TOOLAGENT_MCP_CONFIG`, else `./mcp.json`, else the one shipped in the package.

        `path` (and the variable) may list several files separated by `os.pathsep` (`:`; `;` on
        Windows), as `--servers` given more than once does; each file's `include` list is read
        too. Their servers are merged; a name defined in two files is an error naming both.

        Raises:
            ServerConfigError: unreadable or invalid file, an include cycle, or a server defined twice.
        """
        chosen, _ = config_file(path)
        files = [f for f in chosen.split(os.pathsep) if f]
        merged: dict[str, ServerParams] = {}
        origins: dict[str, str] = {}
        for file in files:
            _merge(merged, origins, cls._load_with_includes(file, chain=()))
        config = cls(mcpServers=merged)
        config._files = origins
        return config

    @classmethod
    def _load_with_includes(cls, file: str, *, chain: tuple[Path, ...]) -> ServersConfig:
        where = Path(file).resolve()
        if where in chain:
            cycle = " -> ".join(str(p) for p in (*chain, where))
            raise ServerConfigError(f"include cycle: {cycle}; remove one of these includes", source=file)
        config = cls._load_file(file)
        # A file's top-level connect_timeout_s is its own servers' default, not the merged whole's.
        servers = {
            name: params
            if params.connect_timeout_s or not config.connect_timeout_s
            else params.model_copy(update={"connect_timeout_s": config.connect_timeout_s})
            for name, params in config.mcpServers.items()
        }
        merged, origins = dict(servers), dict.fromkeys(servers, file)
        for included in config.include:
            target = included if Path(included).is_absolute() else str(where.parent / included)
            _merge(merged, origins, cls._load_with_includes(target, chain=(*chain, where)))
        result = cls(mcpServers=merged)
        result._files = origins
        return result

    @classmethod
    def _load_file(cls, chosen: str) -> ServersConfig:
        """One file, validated, its relative `cwd`s resolved (its includes not read)."""
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
        base = Path(chosen).resolve().parent
        config = cls.from_data(data, source=chosen, base=base)
        return config.model_copy(
            update={"mcpServers": {k: _resolve_cwd(v, base) for k, v in config.mcpServers.items()}}
        )


ConfigOrigin = Literal["given", "environment", "working directory", "shipped"]


def config_file(path: str | None = None) -> tuple[str, ConfigOrigin]:
    """The server config file `load(path)` reads, and why that one: `path` (`given`), else
    `TOOLAGENT_MCP_CONFIG` (`environment`), else `./mcp.json` (`working directory`), else the one
    shipped in the package (`shipped`).

    Raises:
        ServerConfigError: none of them exists.
    """
    if path:
        return path, "given"
    env = Settings.from_env().mcp_config
    if env:
        return env, "environment"
    if Path(DEFAULT_CONFIG_FILE).is_file():
        return DEFAULT_CONFIG_FILE, "working directory"
    if servers_file().is_file():
        return str(servers_file()), "shipped"
    raise ServerConfigError(
        f"no MCP server config: create {DEFAULT_CONFIG_FILE} or pass --servers FILE (or set {CONFIG_ENV})"
    )


def _merge(into: dict[str, ServerParams], origins: dict[str, str], other: ServersConfig) -> None:
    """Add `other`'s servers to `into` (and their files to `origins`).

    Raises:
        ServerConfigError: a server name is taken already.
    """
    for name, params in other.mcpServers.items():
        if name in into:
            first, second = origins[name], other.file_of(name) or "<config>"
            raise ServerConfigError(
                f"server '{name}' is defined in both {first} and {second}: its name is its tools' namespace, "
                "so rename it in one file (or remove it from one)",
                source=second,
            )
        into[name] = params
        origins[name] = other.file_of(name) or "<config>"


def _resolve_cwd(server: ServerParams, base: Path) -> ServerParams:
    # A relative cwd is relative to the config file, not to wherever toolagent was started.
    if isinstance(server, StdioServer) and server.cwd and not Path(server.cwd).is_absolute():
        return server.model_copy(update={"cwd": str(base / server.cwd)})
    return server
