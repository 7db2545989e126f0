"""`SupabaseSettings`: the server's configuration, read from `SUPABASE_*` environment variables.

| variable | field | default |
| --- | --- | --- |
| `SUPABASE_BACKEND` | `backend` | `embedded` (`embedded` or `postgres`) |
| `SUPABASE_DB_URL` | `db_url` | none; required for `postgres` |
| `SUPABASE_DEMO_DB` | `demo_db_path` | `~/.cache/toolagent/supabase-demo.sqlite` |
| `SUPABASE_ALLOWED_TABLES` | `allowed_tables` | the demo tables; comma-separated, `*` for every table of schema public |
| `SUPABASE_ALLOWED_CATALOG_TABLES` | `allowed_catalog_tables` | none; comma-separated catalog relations to allow |
| `SUPABASE_STATEMENT_TIMEOUT_MS` | `statement_timeout_ms` | 15000 |
| `SUPABASE_MAX_RESULT_BYTES` | `max_result_bytes` | 5000000 |
| `SUPABASE_LLM_PROVIDER` | `llm_provider` | none (`openai-compatible`) |
| `SUPABASE_LLM_MODEL` | `llm_model` | none |
| `SUPABASE_LLM_ENDPOINT` | `llm_endpoint` | none (base URL, e.g. `https://host/v1`) |
| `SUPABASE_LLM_API_KEY` | `llm_api_key` | none |

The LLM is used only when all four `SUPABASE_LLM_*` variables are set; none of them has a
default. Setting only some of them is an error (naming the first one missing), never a silent
fallback to the offline generator.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from ...errors import ConfigError, EnvVarMissing

#: Where the embedded demo database is built when SUPABASE_DEMO_DB is not set.
DEFAULT_DEMO_DB_PATH = Path("~/.cache/toolagent/supabase-demo.sqlite")
#: Statement timeout when SUPABASE_STATEMENT_TIMEOUT_MS is not set.
DEFAULT_STATEMENT_TIMEOUT_MS = 15_000
#: Tables SQL may touch when SUPABASE_ALLOWED_TABLES is not set: the demo tables.
DEFAULT_ALLOWED_TABLES = ("users", "agent_conversations", "kpi_metrics", "kpi_data")
#: SUPABASE_ALLOWED_TABLES value that allows every table of schema public (never a catalog).
ALL_TABLES = "*"
#: Result bytes per execute-sql call when SUPABASE_MAX_RESULT_BYTES is not set.
DEFAULT_MAX_RESULT_BYTES = 5_000_000

_ENV_FIELDS = {
    "SUPABASE_BACKEND": "backend",
    "SUPABASE_DB_URL": "db_url",
    "SUPABASE_DEMO_DB": "demo_db_path",
    "SUPABASE_ALLOWED_TABLES": "allowed_tables",
    "SUPABASE_ALLOWED_CATALOG_TABLES": "allowed_catalog_tables",
    "SUPABASE_STATEMENT_TIMEOUT_MS": "statement_timeout_ms",
    "SUPABASE_MAX_RESULT_BYTES": "max_result_bytes",
    "SUPABASE_LLM_PROVIDER": "llm_provider",
    "SUPABASE_LLM_MODEL": "llm_model",
    "SUPABASE_LLM_ENDPOINT": "llm_endpoint",
    "SUPABASE_LLM_API_KEY": "llm_api_key",
}
_LLM_VARS = ("SUPABASE_LLM_PROVIDER", "SUPABASE_LLM_MODEL", "SUPABASE_LLM_ENDPOINT", "SUPABASE_LLM_API_KEY")


class SupabaseSettings(BaseModel):
    """Configuration of the Supabase MCP server."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: Literal["embedded", "postgres"] = "embedded"
    """`embedded`: a SQLite demo database built from `seeds/demo_db`; `postgres`: `db_url`."""
    db_url: SecretStr | None = None
    """PostgreSQL URL (`postgresql://` or `postgres://`, as Supabase gives it); postgres only."""
    demo_db_path: Path = DEFAULT_DEMO_DB_PATH
    """The embedded SQLite file; built on first use and rebuilt when the seed files change."""
    allowed_tables: tuple[str, ...] | None = DEFAULT_ALLOWED_TABLES
    """The only tables get-schema shows and SQL may touch; None (`*`) allows every table of schema public."""
    allowed_catalog_tables: tuple[str, ...] = ()
    """Catalog relations (`pg_*`, `information_schema.*`, `sqlite_*`) SQL may read; all others are refused."""
    statement_timeout_ms: int = Field(DEFAULT_STATEMENT_TIMEOUT_MS, ge=1)
    """Longest a statement (and a schema read) may run, in milliseconds."""
    max_result_bytes: int = Field(DEFAULT_MAX_RESULT_BYTES, ge=1)
    """Most bytes of rows (as JSON) one execute-sql call returns; fetching stops there."""
    llm_provider: Literal["openai-compatible"] | None = None
    """LLM API flavour; only `openai-compatible` (POST {endpoint}/chat/completions)."""
    llm_model: str | None = None
    """Model name sent to the LLM endpoint."""
    llm_endpoint: str | None = None
    """Base URL of the LLM API, e.g. `https://api.example.com/v1`."""
    llm_api_key: SecretStr | None = None
    """Bearer token for the LLM endpoint."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> SupabaseSettings:
        """Read the `SUPABASE_*` variables; empty values count as unset.

        Raises:
            ConfigError: a value is malformed (the message names the variable).
            EnvVarMissing: only some of the `SUPABASE_LLM_*` variables are set.
        """
        values: dict[str, object] = {}
        for var, name in _ENV_FIELDS.items():
            raw = environ.get(var, "").strip()
            if not raw:
                continue
            if name == "allowed_tables" and raw == ALL_TABLES:
                values[name] = None
            elif name in ("allowed_tables", "allowed_catalog_tables"):
                values[name] = tuple(t.strip() for t in raw.split(",") if t.strip())
            else:
                values[name] = raw
        given = [v for v in _LLM_VARS if environ.get(v, "").strip()]
        if given and len(given) < len(_LLM_VARS):
            missing = next(v for v in _LLM_VARS if v not in given)
            raise EnvVarMissing(missing, source=f"{given[0]} is set, so the LLM needs all of {', '.join(_LLM_VARS)}")
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = str(first["loc"][0]) if first["loc"] else ""
            var = next((v for v, n in _ENV_FIELDS.items() if n == field), field)
            raise ConfigError(f"{var}: {first['msg']}") from exc

    @property
    def llm_enabled(self) -> bool:
        """True when every LLM setting is given."""
        return None not in (self.llm_provider, self.llm_model, self.llm_endpoint, self.llm_api_key)

    def require_db_url(self) -> str:
        """The PostgreSQL URL in the plain form psycopg takes.

        Raises:
            EnvVarMissing: `SUPABASE_DB_URL` is not set.
        """
        if self.db_url is None or not self.db_url.get_secret_value().strip():
            raise EnvVarMissing("SUPABASE_DB_URL")
        return plain_postgres_url(self.db_url.get_secret_value())

    def check(self) -> None:
        """Fail now on what would fail every tool call later (a missing database URL).

        Raises:
            EnvVarMissing: the postgres backend has no `SUPABASE_DB_URL`.
        """
        if self.backend == "postgres":
            self.require_db_url()

    def resolved_demo_db_path(self) -> Path:
        """`demo_db_path` with `~` expanded."""
        return self.demo_db_path.expanduser()


def plain_postgres_url(url: str) -> str:
    """Turn SQLAlchemy-style URLs (`postgresql+psycopg://`) into libpq ones psycopg accepts."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme.startswith(("postgresql+", "postgres+")):
        return f"postgresql://{rest}"
    return url
