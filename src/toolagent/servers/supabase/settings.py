"""`SupabaseSettings`: the server's configuration, read from `SUPABASE_*` environment variables.

| variable | field | default |
| --- | --- | --- |
| `SUPABASE_BACKEND` | `backend` | `embedded` (`embedded`, `postgres` or `supabase`) |
| `SUPABASE_DB_URL` | `db_url` | none; required for `postgres` |
| `SUPABASE_URL` | `url` | none; required for `supabase` (`https://<ref>.supabase.co`) |
| `SUPABASE_SERVICE_ROLE_KEY` | `service_role_key` | none; `supabase`: this key, or the anon key with a reader JWT |
| `SUPABASE_ANON_KEY` | `anon_key` | none; `supabase`, with `SUPABASE_READER_JWT` |
| `SUPABASE_READER_JWT` | `reader_jwt` | none; a JWT whose `role` is the reader role the functions are granted to |
| `SUPABASE_DEMO_DB` | `demo_db_path` | `~/.cache/toolagent/supabase-demo.sqlite` |
| `SUPABASE_ALLOWED_TABLES` | `allowed_tables` | the demo tables; comma-separated, `*` for every table of schema public |
| `SUPABASE_ALLOWED_CATALOG_TABLES` | `allowed_catalog_tables` | none; comma-separated catalog relations to allow |
| `SUPABASE_STATEMENT_TIMEOUT_MS` | `statement_timeout_ms` | 15000 |
| `SUPABASE_MAX_RESULT_BYTES` | `max_result_bytes` | 5000000 |
| `SUPABASE_LLM_PROVIDER` | `llm_provider` | none (`openai-compatible`) |
| `SUPABASE_LLM_MODEL` | `llm_model` | none |
| `SUPABASE_LLM_ENDPOINT` | `llm_endpoint` | none (base URL, e.g. `https://host/v1`) |
| `SUPABASE_LLM_API_KEY` | `llm_api_key` | none |
| `SUPABASE_READER_PASSWORD` | `reader_password` | none; `load-demo` only |

The LLM is used only when all four `SUPABASE_LLM_*` variables are set; none of them has a
default. Setting only some of them is an error (naming the first one missing), never a silent
fallback to the offline generator.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from ...errors import ConfigError, EnvVarMissing
from ...settings import EnvSettings

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

#: How a missing key is named (the PRD's "SUPABASE_URL (or key)"): either key works.
KEY_VARIABLES = "SUPABASE_SERVICE_ROLE_KEY (or SUPABASE_ANON_KEY with SUPABASE_READER_JWT)"

#: Prefix of the variables `SupabaseSettings` reads.
ENV_PREFIX = "SUPABASE_"
_LLM_FIELDS = ("llm_provider", "llm_model", "llm_endpoint", "llm_api_key")
_LLM_VARS = tuple(ENV_PREFIX + f.upper() for f in _LLM_FIELDS)


class SupabaseSettings(EnvSettings):
    """Configuration of the Supabase MCP server, from `SUPABASE_*` environment variables."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_ignore_empty=True, extra="ignore", frozen=True, populate_by_name=True
    )

    backend: Literal["embedded", "postgres", "supabase"] = "embedded"
    """`embedded`: a SQLite demo database built from `seeds/demo_db`; `postgres`: `db_url`;
    `supabase`: a project over HTTPS (`url` and a key), through two SQL functions called over RPC."""
    db_url: SecretStr | None = None
    """PostgreSQL URL (`postgresql://` or `postgres://`, as Supabase gives it); postgres only."""
    url: str | None = None
    """The project URL (`https://<ref>.supabase.co`); supabase only."""
    service_role_key: SecretStr | None = None
    """The project's service_role key; the functions must be granted to `service_role`."""
    anon_key: SecretStr | None = None
    """The project's anon key, sent as `apikey`; with it `reader_jwt` is sent as the bearer token."""
    reader_jwt: SecretStr | None = None
    """A JWT signed with the project's JWT secret whose `role` claim is the reader role the
    functions are granted to (never `anon`); needed with `anon_key`."""
    demo_db_path: Path = Field(DEFAULT_DEMO_DB_PATH, validation_alias="SUPABASE_DEMO_DB")
    """The embedded SQLite file; built on first use and rebuilt when the seed files change."""
    allowed_tables: Annotated[tuple[str, ...] | None, NoDecode] = DEFAULT_ALLOWED_TABLES
    """The only tables get-schema shows and SQL may touch; None (`*`) allows every table of schema public."""
    allowed_catalog_tables: Annotated[tuple[str, ...], NoDecode] = ()
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
    reader_password: SecretStr | None = None
    """Password of the read-only role `load-demo` creates (the server itself never reads it)."""

    @field_validator("allowed_tables", "allowed_catalog_tables", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            if value.strip() == ALL_TABLES:
                return None
            return tuple(t.strip() for t in value.split(",") if t.strip())
        return value

    @field_validator(
        "db_url", "url", "service_role_key", "anon_key", "reader_jwt",
        "llm_provider", "llm_model", "llm_endpoint", "llm_api_key", mode="before",
    )  # fmt: skip
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @model_validator(mode="after")
    def _llm_all_or_none(self) -> SupabaseSettings:
        given = [var for var, name in zip(_LLM_VARS, _LLM_FIELDS, strict=True) if getattr(self, name) is not None]
        if given and len(given) < len(_LLM_VARS):
            missing = next(v for v in _LLM_VARS if v not in given)
            raise EnvVarMissing(missing, source=f"{given[0]} is set, so the LLM needs all of {', '.join(_LLM_VARS)}")
        return self

    @classmethod
    def env_names(cls) -> dict[str, str]:
        """Each environment variable and the field it sets."""
        return {
            (f.validation_alias if isinstance(f.validation_alias, str) else ENV_PREFIX + name.upper()): name
            for name, f in cls.model_fields.items()
        }

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SupabaseSettings:
        """Read the `SUPABASE_*` variables of the process (or of `environ`); empty values count as unset.

        Raises:
            ConfigError: a value is malformed (the message names the variable).
            EnvVarMissing: only some of the `SUPABASE_LLM_*` variables are set.
        """
        try:
            return cls.build(environ)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = str(first["loc"][0]) if first["loc"] else ""
            var = next((v for v, n in cls.env_names().items() if n == field or v == field), field)
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

    def require_project(self) -> tuple[str, str, str | None]:
        """The project URL, the key sent as `apikey`, and the bearer token if it differs.

        Raises:
            EnvVarMissing: `SUPABASE_URL` or every key is missing, or the anon key has no reader JWT.
            ConfigError: `SUPABASE_URL` is not an http(s) URL.
        """
        if self.url is None:
            raise EnvVarMissing("SUPABASE_URL")
        if not self.url.startswith(("https://", "http://")):
            raise ConfigError(
                f"SUPABASE_URL: {self.url!r} is not an https:// URL (the project URL, https://<ref>.supabase.co)"
            )
        if self.service_role_key is not None:
            return self.url.rstrip("/"), self.service_role_key.get_secret_value(), None
        if self.anon_key is None:
            raise EnvVarMissing(KEY_VARIABLES)
        if self.reader_jwt is None:
            # The functions are never granted to anon, so the anon key alone can run nothing.
            raise EnvVarMissing("SUPABASE_READER_JWT", source="SUPABASE_ANON_KEY is set without the reader role's JWT")
        return self.url.rstrip("/"), self.anon_key.get_secret_value(), self.reader_jwt.get_secret_value()

    def check(self) -> None:
        """Fail now on what would fail every tool call later (a missing database URL or key).

        Raises:
            EnvVarMissing: the postgres backend has no `SUPABASE_DB_URL`; the supabase backend
                has no `SUPABASE_URL` or no key.
        """
        if self.backend == "postgres":
            self.require_db_url()
        elif self.backend == "supabase":
            self.require_project()

    def resolved_demo_db_path(self) -> Path:
        """`demo_db_path` with `~` expanded."""
        return self.demo_db_path.expanduser()


def plain_postgres_url(url: str) -> str:
    """Turn SQLAlchemy-style URLs (`postgresql+psycopg://`) into libpq ones psycopg accepts."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme.startswith(("postgresql+", "postgres+")):
        return f"postgresql://{rest}"
    return url
