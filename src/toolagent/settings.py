"""`Settings`: every environment variable the toolagent CLI, API and library read, in one model.

| variable | field | default |
| --- | --- | --- |
| `TOOLAGENT_DATABASE_URL` | `database_url` | `toolagent.db` (SQLite) in the user's data directory (`user_data_dir()`) |
| `TOOLAGENT_MCP_CONFIG` | `mcp_config` | `./mcp.json`, else the config shipped in the package |
| `TOOLAGENT_ENGINE_CONFIG` | `engine_config` | none (the built-in engine defaults) |
| `TOOLAGENT_USER` | `user` | the local user |
| `TOOLAGENT_API_URL` | `api_url` | none (the CLI opens the store itself) |
| `TOOLAGENT_API_KEY` | `api_key` | none |
| `TOOLAGENT_LOG_LEVEL` | `log_level` | `warning` |
| `TOOLAGENT_LOG_FORMAT` | `log_format` | `text` |
| `TOOLAGENT_METRICS_AUTH` | `metrics_auth` | `none` |
| `TOOLAGENT_MAX_BODY_BYTES` | `max_body_bytes` | 1048576 (1 MiB) |
| `TOOLAGENT_FLOW_MAX_ITEMS` | `flow_max_items` | 1000 |
| `TOOLAGENT_FLOW_MAX_CHARS` | `flow_max_chars` | 200000 |
| `TOOLAGENT_EXECUTION` | `execution` | `inprocess` |
| `TOOLAGENT_WORKER_STALLED_S` | `worker_stalled_s` | 60 |
| `TOOLAGENT_JOB_RETENTION_S` | `job_retention_s` | 3600 |
| `TOOLAGENT_AUDIT_KEY` | `audit_key` | none (the audit chain is unkeyed) |
| `TOOLAGENT_AUDIT_KEY_FILE` | `audit_key_file` | none |
| `TOOLAGENT_MAX_RESULT_BYTES` | `max_result_bytes` | 1048576 (1 MiB) |
| `TOOLAGENT_MAX_DELIVERABLE_BYTES` | `max_deliverable_bytes` | 4194304 (4 MiB) |
| `TOOLAGENT_SQL_TOOLS_REQUIRE_AGENT` | `sql_tools_require_agent` | false |
| `TOOLAGENT_COMMIT_WINDOW_MS` | `commit_window_ms` | 20 |
| `TOOLAGENT_COMMIT_BATCH_MAX` | `commit_batch_max` | 64 |
| `TOOLAGENT_GATEWAY_ALLOWED_ORIGINS` | `gateway_allowed_origins` | the loopback origins |

`UserDirs` reads the platform's own variables (`XDG_DATA_HOME`, `HOME`, `LOCALAPPDATA`) for the
per-user data directory. Empty values count as unset. The environment is read when `Settings.from_env()` is called, not
at import, so a variable set later (a test, a parent process) is seen by the next reader. The MCP
server config's own `${VAR}` references read the whole environment through `environ()`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Self

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from .errors import UsageError

#: Prefix of every variable `Settings` reads.
ENV_PREFIX = "TOOLAGENT_"

#: The mapping `from_env(environ)` reads instead of the process environment, while it builds.
_GIVEN: ContextVar[Mapping[str, str] | None] = ContextVar("toolagent_settings_environ", default=None)


class _GivenEnvSource(EnvSettingsSource):
    """The environment source over a mapping the caller gave, parsed exactly as the real one."""

    def __init__(self, settings_cls: type[BaseSettings], given: Mapping[str, str]) -> None:
        self._given = given
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        values = {k if self.case_sensitive else k.lower(): v for k, v in self._given.items()}
        return {k: v for k, v in values.items() if not (self.env_ignore_empty and v == "")}


class EnvSettings(BaseSettings):
    """Settings read from environment variables only (no .env or secret files), from the process
    environment or from a mapping given to `build`."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Init arguments, then the environment (the given mapping while `build` runs)."""
        given = _GIVEN.get()
        return (init_settings, env_settings if given is None else _GivenEnvSource(settings_cls, given))

    @classmethod
    def build(cls, environ: Mapping[str, str] | None = None) -> Self:
        """An instance from the process environment, or from `environ` alone when given.

        Raises:
            ValidationError: a value is malformed.
        """
        with _reading(environ):
            return cls()


@contextmanager
def _reading(environ: Mapping[str, str] | None) -> Iterator[None]:
    token = _GIVEN.set(environ)
    try:
        yield
    finally:
        _GIVEN.reset(token)


class Settings(EnvSettings):
    """The toolagent program's settings, from `TOOLAGENT_*` environment variables."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_ignore_empty=True, extra="ignore", frozen=True)

    database_url: str | None = None
    """The store URL (the CLI's `--db` wins over it)."""
    mcp_config: str | None = None
    """The MCP server config file (the CLI's `--servers` wins over it)."""
    engine_config: str | None = None
    """A YAML or JSON file overriding the engine's defaults (plans, levels, limits, timeouts)."""
    user: str | None = None
    """The user the CLI acts as (its `--user` wins over it)."""
    api_url: str | None = None
    """A running `toolagent serve` the CLI sends its tool calls, builds and reads to, instead of
    opening the store and starting servers itself (the CLI's `--api` wins over it)."""
    api_key: str | None = Field(None, repr=False)
    """The API key the CLI sends to `api_url` (`toolagent keys create` prints one)."""
    log_level: str | None = None
    """`debug`, `info`, `warning` or `error`."""
    log_format: str | None = None
    """`text` or `json` (JSON lines)."""
    metrics_auth: str | None = None
    """Who may read the API's `/metrics`: `none`, `key` or `admin`."""
    max_body_bytes: str | None = None
    """Largest request body the API accepts, in bytes (checked where it is used)."""
    flow_max_items: int | None = Field(None, ge=1)
    """Longest list a step's result passes on to later steps."""
    flow_max_chars: int | None = Field(None, ge=1)
    """Longest string a step's result passes on to later steps."""
    execution: str | None = Field(None, pattern="^(inprocess|queue)$")
    """`queue`: BUILD runs and async tool calls are submitted to the workers (PostgreSQL);
    `inprocess` (default): run here."""
    worker_stalled_s: float | None = Field(None, gt=0)
    """Seconds without a heartbeat after which a worker counts as stopped and its runs are reaped."""
    job_retention_s: float | None = Field(None, ge=0)
    """Seconds a finished job stays in the queue's table before the reaper deletes it (default 3600)."""
    audit_key: str | None = Field(None, repr=False)
    """The audit chain's HMAC key (kept outside the store); unset: the chain is unkeyed."""
    audit_key_file: str | None = None
    """A file holding the audit key (surrounding whitespace ignored), instead of `audit_key`."""
    max_result_bytes: int | None = Field(None, ge=1024)
    """Largest tool result stored with an execution or a step, or answered, in bytes of compact JSON."""
    max_deliverable_bytes: int | None = Field(None, ge=4096)
    """Largest deliverable stored or answered (its content plus its data), in bytes."""
    sql_tools_require_agent: bool | None = None
    """Direct calls of SQL-taking tools must name an agent whose `security` block then applies."""
    commit_window_ms: float | None = Field(None, ge=0)
    """Longest wait, in milliseconds, of a batch of concurrent calls' writes for more writes
    before it commits (a lone write waits 4 ms at most, and only while other calls are under
    way); 0: commit whatever is queued at once."""
    commit_batch_max: int | None = Field(None, ge=1)
    """Most calls' writes committed in one transaction."""
    gc_threshold: int | None = Field(None, ge=100)
    """Net allocations between collections of the young generation in `serve` and `worker`
    (default 10,000; Python's own is 700)."""
    gateway_allowed_origins: str | None = None
    """Browser origins the MCP gateway at `/mcp` accepts, comma-separated (`http://host:port`, a
    `:*` port wildcard, or `*`); a request with another `Origin` gets 403."""

    @classmethod
    def env_names(cls) -> dict[str, str]:
        """Each environment variable and the field it sets."""
        return {ENV_PREFIX + name.upper(): name for name in cls.model_fields}

    @classmethod
    def defaults(cls) -> Settings:
        """Every setting at its default, whatever the environment holds: for a library or a test
        that needs settings without an entry point's."""
        return cls.from_env({})

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings from the process environment (or from `environ`, for a caller that has its own).

        Raises:
            UsageError: a value is malformed (the message names the variable and what it takes).
        """
        try:
            return cls.build(environ)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = str(first["loc"][0]) if first["loc"] else ""
            var = ENV_PREFIX + field.upper()
            raw: Any = first.get("input")
            kind = (
                "a positive integer"
                if field.startswith("flow_max_") or field == "commit_batch_max"
                else "inprocess or queue"
                if field == "execution"
                else "a positive number"
                if field == "worker_stalled_s"
                else "a number >= 0"
                if field == "commit_window_ms"
                else "a number of seconds, 0 or more"
                if field == "job_retention_s"
                else f"an integer of at least {_minimum(field)}"
                if _minimum(field)
                else "true or false"
                if field == "sql_tools_require_agent"
                else "valid"
            )
            raise UsageError(f"{var} must be {kind}, got {raw!r}") from exc


def _minimum(field: str) -> int | None:
    """The `ge` bound of an integer field, for its error message."""
    for meta in Settings.model_fields[field].metadata:
        bound = getattr(meta, "ge", None)
        if bound is not None:
            return int(bound)
    return None


class UserDirs(EnvSettings):
    """The platform's variables that locate a user's data directory (no `TOOLAGENT_` prefix)."""

    model_config = SettingsConfigDict(env_ignore_empty=True, extra="ignore", frozen=True)

    xdg_data_home: str | None = None
    """`XDG_DATA_HOME`: the base of per-user data on Linux and other XDG systems."""
    home: str | None = None
    """`HOME`: the user's home directory (else the OS account's)."""
    localappdata: str | None = None
    """`LOCALAPPDATA`: the base of per-user data on Windows."""


def user_data_dir(environ: Mapping[str, str] | None = None) -> Path:
    """toolagent's per-user data directory: `$XDG_DATA_HOME/toolagent`, else
    `~/.local/share/toolagent` (Linux and other XDG systems); `~/Library/Application Support/toolagent`
    on macOS; `%LOCALAPPDATA%\\toolagent` on Windows. Read from the process environment, or from
    `environ` alone when given."""
    dirs: UserDirs = UserDirs.build(environ)
    home = Path(dirs.home) if dirs.home else Path.home()
    if sys.platform == "win32":
        return Path(dirs.localappdata or home / "AppData" / "Local") / "toolagent"
    if sys.platform == "darwin" and not dirs.xdg_data_home:
        return home / "Library" / "Application Support" / "toolagent"
    # XDG says a relative XDG_DATA_HOME is invalid and is to be ignored.
    if dirs.xdg_data_home and Path(dirs.xdg_data_home).is_absolute():
        return Path(dirs.xdg_data_home) / "toolagent"
    return home / ".local" / "share" / "toolagent"


def export_for_children(**values: str | None) -> None:
    """Set settings (by field name; None leaves a variable alone) in this process's environment, so
    the processes it starts next inherit them.

    Raises:
        KeyError: a name is not a settings field.
    """
    for name, value in values.items():
        if name not in Settings.model_fields:
            raise KeyError(f"no setting named {name!r}")
        if value is not None:
            os.environ[ENV_PREFIX + name.upper()] = value


def environ() -> Mapping[str, str]:
    """The whole process environment, for `${VAR}` references in the MCP server config (any name)."""
    return os.environ


__all__ = ["ENV_PREFIX", "EnvSettings", "Settings", "UserDirs", "environ", "export_for_children", "user_data_dir"]
