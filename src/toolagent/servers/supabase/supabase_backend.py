"""A Supabase project over HTTPS: the `supabase` client calls two SQL functions through
PostgREST's RPC endpoint (`POST {url}/rest/v1/rpc/{fn}`), installed by
`toolagent supabase install-functions` (`functions.py`).

One client per backend, so per server process: importing `supabase` takes a second or two and
building a client 50-200 ms (each builds httpx clients with their own TLS contexts); both happen
on first use, never per call. The client's HTTP timeout is the statement timeout plus a margin,
so a statement the database does not stop still ends the call; the database's own timeout is
the functions' `SET statement_timeout`, which PostgREST applies before calling them.

The server's SQL guard has checked every statement before `execute` sends it. PostgREST's and
httpx's errors become `StoreError` here (the one translation point), saying what to change.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from ...errors import StoreError
from .backends import MAX_CATEGORY_VALUES, Backend, dedupe_columns, is_text_type, json_value, normalize_type, quote_name
from .functions import EXEC_FUNCTION, INSTALL_COMMAND, SCHEMA_FUNCTION
from .limits import DEFAULT_MAX_RESULT_BYTES, collect, statement_body
from .models import QueryResult, TableInfo

#: Seconds the HTTP request may outlast the statement timeout (connection, PostgREST, the body).
HTTP_TIMEOUT_MARGIN_S = 5.0

# PostgREST's codes (PGRST...) and PostgreSQL's SQLSTATEs it passes through.
_NOT_FOUND = {"PGRST202", "42883"}  # function not in the schema cache / undefined function
_BAD_KEY = {"PGRST300", "PGRST301", "PGRST302", "PGRST303", "401"}
_PERMISSION = {"42501"}
_TIMED_OUT = {"57014"}


class SupabaseBackend(Backend):
    """A Supabase project (or any PostgREST in front of PostgreSQL), read through two RPC functions."""

    name = "supabase"

    def __init__(
        self,
        url: str,
        key: str,
        statement_timeout_ms: int,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        *,
        bearer: str | None = None,
        key_variable: str = "SUPABASE_SERVICE_ROLE_KEY",
        http_client: Any = None,
    ) -> None:
        """
        Args:
            url: the project URL (`https://<ref>.supabase.co`).
            key: sent as `apikey` (and as the bearer token unless `bearer` is given).
            statement_timeout_ms: what a timed-out call reports; the HTTP timeout adds a margin.
            max_result_bytes: bytes of rows one call returns.
            bearer: a JWT for `Authorization` (the reader role's, with the anon key).
            key_variable: the variable the key came from, named when it is rejected.
            http_client: an `httpx.Client` for the client to use (tests pass a mock transport).
        """
        super().__init__(statement_timeout_ms, max_result_bytes)
        self.url = url
        self._key = key
        self._bearer = bearer
        self._key_variable = key_variable
        self._http_client = http_client
        self._client: Any = None
        self._client_lock = threading.Lock()

    # -- the client ---------------------------------------------------------------------------

    @property
    def client(self) -> Any:
        """The `supabase` client, imported and built on first use (calls run in worker threads)."""
        with self._client_lock:
            if self._client is None:
                import httpx
                from supabase import ClientOptions, create_client

                headers = dict(ClientOptions().headers)
                if self._bearer is not None:
                    headers["Authorization"] = f"Bearer {self._bearer}"
                # Our own httpx client: the client's timeout option would be cut to whole
                # seconds (and is deprecated); HTTP/1.1 keep-alive is enough for one caller.
                http = self._http_client or httpx.Client(
                    timeout=httpx.Timeout(self.statement_timeout_ms / 1000 + HTTP_TIMEOUT_MARGIN_S, connect=10.0),
                    follow_redirects=True,
                )
                options = ClientOptions(
                    headers=headers,
                    # A POST is never retried by the client anyway; say so rather than rely on it.
                    postgrest_client_retry=False,
                    auto_refresh_token=False,
                    persist_session=False,
                    httpx_client=http,
                )
                try:
                    self._client = create_client(self.url, self._key, options=options)
                except Exception as exc:  # the client validates the URL and key format
                    raise StoreError(f"cannot build the Supabase client for {self.url}: {exc}") from exc
            return self._client

    def rpc(self, fn: str, params: dict[str, Any]) -> Any:
        """Call `fn` over PostgREST's RPC endpoint; its JSON result.

        Raises:
            StoreError: naming the fix for a bad key, a missing function, a refused grant or a
                timeout, else PostgREST's message, code and hint.
        """
        import httpx
        from postgrest.exceptions import APIError

        client = self.client
        try:
            return client.rpc(fn, params).execute().data
        except APIError as exc:
            raise self._translate(fn, exc) from exc
        except httpx.TimeoutException as exc:
            raise StoreError(
                f"statement timed out after {self.statement_timeout_ms} ms "
                f"(no answer from {self.url} within the HTTP timeout)"
            ) from exc
        except httpx.HTTPError as exc:
            raise StoreError(f"cannot reach the Supabase project at {self.url}: {exc}") from exc

    def _translate(self, fn: str, exc: Any) -> StoreError:
        code = str(exc.code or "")
        message = str(exc.message or "").strip() or "no message"
        if code in _NOT_FOUND:
            return StoreError(
                f"the function {fn} is not installed in the Supabase project at {self.url} "
                f"({message}): run `{INSTALL_COMMAND}`, or paste the output of "
                "`toolagent supabase install-functions --print` into the project's SQL editor"
            )
        if code in _BAD_KEY or "invalid api key" in message.lower() or code.startswith("PGRST30"):
            return StoreError(
                f"the Supabase project at {self.url} rejected the key ({message}): check "
                f"{self._key_variable} against the project's API settings"
            )
        if code in _PERMISSION:
            return StoreError(
                f"permission denied ({message}): the functions run with the key's role; install them for "
                f"that role with `{INSTALL_COMMAND} --reader-role ROLE`, and grant it SELECT on the tables"
            )
        if code in _TIMED_OUT:
            return StoreError(f"statement timed out after {self.statement_timeout_ms} ms ({message})")
        hint = f"; hint: {exc.hint}" if getattr(exc, "hint", None) else ""
        label = f" ({code})" if code else ""
        return StoreError(f"query failed: {message}{label}{hint}")

    # -- Backend ------------------------------------------------------------------------------

    def tables(self) -> list[TableInfo]:
        data = self.rpc(SCHEMA_FUNCTION, {})
        if not isinstance(data, list):
            raise StoreError(f"{SCHEMA_FUNCTION} returned {type(data).__name__}, not a list of tables")
        out: list[TableInfo] = []
        for raw in data:
            table = TableInfo.model_validate(raw)
            for column in table.columns:
                column.type = normalize_type(column.type)
            out.append(table)
        return sorted(out, key=lambda t: t.name)

    def category_values(self, tables: Sequence[TableInfo]) -> dict[tuple[str, str], tuple[str, ...]]:
        # One round trip for every text column: (table, column, value) rows, each column's
        # values capped at MAX_CATEGORY_VALUES + 1 so a column with more is recognisably so.
        parts = [
            f"(SELECT {_literal(t.name)} AS t, {_literal(c.name)} AS c, {quote_name(c.name)}::text AS v "
            f"FROM {quote_name(t.name)} WHERE {quote_name(c.name)} IS NOT NULL GROUP BY {quote_name(c.name)} "
            f"ORDER BY {quote_name(c.name)} LIMIT {MAX_CATEGORY_VALUES + 1})"
            for t in tables
            for c in t.columns
            if is_text_type(c.type)
        ]
        if not parts:
            return {}
        result = self._exec(" UNION ALL ".join(parts), len(parts) * (MAX_CATEGORY_VALUES + 1))
        grouped: dict[tuple[str, str], list[str]] = {}
        for t, c, v in result["rows"]:
            grouped.setdefault((t, c), []).append(str(v))
        return {k: tuple(v) for k, v in grouped.items() if 0 < len(v) <= MAX_CATEGORY_VALUES}

    def execute(self, sql: str, max_rows: int) -> QueryResult:
        result = self._exec(statement_body(sql), max_rows)
        columns = dedupe_columns(result["columns"])
        query_result = collect(
            columns, result["rows"], max_rows=max_rows, max_bytes=self.max_result_bytes, convert=json_value
        )
        oversized = int(result.get("oversized") or 0)
        stopped = result.get("truncated")
        if (oversized or stopped) and not query_result.truncated:
            # The function stopped reading (or left values out) before the client's own count did.
            reason = stopped if stopped in ("max_rows", "max_result_bytes") else "max_result_bytes"
            query_result = query_result.model_copy(update={"truncated": True, "truncated_reason": reason})
        return query_result.model_copy(update={"oversized_values": oversized})

    def _exec(self, body: str, max_rows: int) -> dict[str, Any]:
        """The statement function's result, with each row as a list of values in column order."""
        data = self.rpc(EXEC_FUNCTION, {"query": body, "max_rows": max_rows, "max_bytes": self.max_result_bytes})
        if not isinstance(data, dict) or not isinstance(data.get("columns"), list):
            raise StoreError(
                f"{EXEC_FUNCTION} returned an unexpected result; install it again with `{INSTALL_COMMAND}`"
            )
        # Each row is a record serialized with positional keys (f1..fN), which JSON keeps in order.
        data["rows"] = [list(row.values()) if isinstance(row, dict) else list(row) for row in data.get("rows") or []]
        return data


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


__all__ = ["HTTP_TIMEOUT_MARGIN_S", "SupabaseBackend"]
