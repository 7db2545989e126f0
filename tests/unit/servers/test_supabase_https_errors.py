"""The `supabase` backend's handling of what a Supabase project answers, through the real
`supabase` client on an `httpx.MockTransport` (no socket): errors become tool errors that say
what to change, and results keep column order, duplicate names and truncation.

The bodies are the shapes hosted Supabase's gateway and PostgREST send; no hosted project or
PostgREST was reachable to record them here (see docs/supabase-over-https.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from toolagent.errors import ConfigError, EnvVarMissing, StoreError
from toolagent.servers.supabase.settings import SupabaseSettings
from toolagent.servers.supabase.supabase_backend import SupabaseBackend

URL = "https://abcd.supabase.co"
Handler = Callable[[httpx.Request], httpx.Response]


def backend(handler: Handler, **kwargs: Any) -> SupabaseBackend:
    client = httpx.Client(transport=httpx.MockTransport(handler))
    return SupabaseBackend(URL, "service-key", 1500, http_client=client, **kwargs)


def answer(status: int, body: Any) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json=body)

    return handler


ERRORS = {
    "gateway: bad apikey": (
        answer(
            401, {"message": "Invalid API key", "hint": "Double check your Supabase `anon` or `service_role` API key."}
        ),
        ["rejected the key (Invalid API key)", "check SUPABASE_SERVICE_ROLE_KEY"],
    ),
    "PostgREST: bad JWT": (
        answer(401, {"code": "PGRST301", "message": "JWSError JWSInvalidSignature", "details": None, "hint": None}),
        ["rejected the key (JWSError JWSInvalidSignature)"],
    ),
    "function not installed": (
        answer(
            404,
            {
                "code": "PGRST202",
                "message": "Could not find the function public.toolagent_exec_sql(max_bytes, max_rows, query) in the schema cache",
                "details": None,
                "hint": None,
            },
        ),  # noqa: E501
        ["toolagent_exec_sql is not installed", "toolagent supabase install-functions --db-url URL", "--print"],
    ),
    "no grant": (
        answer(
            403,
            {
                "code": "42501",
                "message": "permission denied for function toolagent_exec_sql",
                "details": None,
                "hint": None,
            },
        ),  # noqa: E501
        ["permission denied (permission denied for function toolagent_exec_sql)", "--reader-role ROLE"],
    ),
    "statement timeout": (
        answer(
            500,
            {"code": "57014", "message": "canceling statement due to statement timeout", "details": None, "hint": None},
        ),  # noqa: E501
        ["statement timed out after 1500 ms (canceling statement due to statement timeout)"],
    ),
    "PostgREST's error body": (
        answer(
            400,
            {
                "code": "42P01",
                "message": 'relation "orders" does not exist',
                "details": None,
                "hint": "Perhaps you meant users",
            },
        ),  # noqa: E501
        ['query failed: relation "orders" does not exist (42P01); hint: Perhaps you meant users'],
    ),
    "a proxy's HTML page": (
        lambda request: httpx.Response(502, text="<html>Bad Gateway</html>"),
        ["query failed: Bad Gateway (502)"],
    ),
}


@pytest.mark.parametrize("handler,expected", list(ERRORS.values()), ids=list(ERRORS))
def test_http_errors_become_errors_that_say_what_to_change(handler: Handler, expected: list[str]) -> None:
    with pytest.raises(StoreError) as info:
        backend(handler).execute("SELECT 1", 10)
    for part in expected:
        assert part in info.value.message


def test_the_anon_setup_names_both_variables_when_rejected() -> None:
    handler = answer(401, {"message": "Invalid API key"})
    with pytest.raises(StoreError, match="check SUPABASE_ANON_KEY and SUPABASE_READER_JWT"):
        backend(handler, key_variable="SUPABASE_ANON_KEY and SUPABASE_READER_JWT").tables()


def test_no_answer_within_the_timeout_is_a_timeout() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    with pytest.raises(StoreError, match="statement timed out after 1500 ms .no answer from https://abcd"):
        backend(handler).execute("SELECT 1", 10)


def test_an_unreachable_project_says_so() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("Name or service not known", request=request)

    with pytest.raises(StoreError, match="cannot reach the Supabase project at https://abcd.supabase.co"):
        backend(handler).tables()


def test_an_old_or_foreign_function_result_is_reported() -> None:
    with pytest.raises(StoreError, match="unexpected result; install it again"):
        backend(answer(200, [{"id": 1}])).execute("SELECT 1", 10)


def test_request_shape_and_result_columns() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        # A raw body: the function's result keeps duplicate column names in a list.
        body = '{"columns":["id","id","name"],"rows":[{"f1":1,"f2":7,"f3":"a"}],"oversized":0,"truncated":null}'
        return httpx.Response(200, text=body, headers={"content-type": "application/json"})

    result = backend(handler, bearer="reader-jwt").execute("SELECT u.id, o.id, u.name FROM u JOIN o ON true;", 10)
    assert result.columns == ["id", "id_2", "name"]
    assert result.rows == [{"id": 1, "id_2": 7, "name": "a"}]
    [request] = seen
    assert (request.method, request.url.path) == ("POST", "/rest/v1/rpc/toolagent_exec_sql")
    assert request.headers["apikey"] == "service-key"
    assert request.headers["authorization"] == "Bearer reader-jwt"
    # The trailing semicolon is gone, so the function can nest the statement.
    assert json.loads(request.content)["query"] == "SELECT u.id, o.id, u.name FROM u JOIN o ON true"


def test_truncation_the_function_reports_is_kept() -> None:
    body = {"columns": ["v"], "rows": [{"f1": None}], "oversized": 1, "truncated": None}
    result = backend(answer(200, body)).execute("SELECT v FROM t", 10)
    assert result.truncated and result.truncated_reason == "max_result_bytes" and result.oversized_values == 1
    stopped = {"columns": ["v"], "rows": [{"f1": 1}], "oversized": 0, "truncated": "max_result_bytes"}
    assert backend(answer(200, stopped)).execute("SELECT v FROM t", 10).truncated_reason == "max_result_bytes"
    more = {"columns": ["v"], "rows": [{"f1": 1}, {"f1": 2}, {"f1": 3}], "oversized": 0, "truncated": "max_rows"}
    capped = backend(answer(200, more)).execute("SELECT v FROM t", 2)
    assert capped.rows == [{"v": 1}, {"v": 2}] and capped.truncated_reason == "max_rows"


# -- settings ----------------------------------------------------------------------------------


def settings(**environ: str) -> SupabaseSettings:
    return SupabaseSettings.from_env({"SUPABASE_BACKEND": "supabase", **environ})


def test_missing_url_or_key_names_the_variable() -> None:
    with pytest.raises(EnvVarMissing, match="^Required environment variable SUPABASE_URL is not set$"):
        settings(SUPABASE_SERVICE_ROLE_KEY="k").check()
    with pytest.raises(EnvVarMissing, match=r"SUPABASE_SERVICE_ROLE_KEY \(or SUPABASE_ANON_KEY with"):
        settings(SUPABASE_URL=URL, SUPABASE_SERVICE_ROLE_KEY="  ").check()
    with pytest.raises(EnvVarMissing, match="SUPABASE_READER_JWT is not set"):
        settings(SUPABASE_URL=URL, SUPABASE_ANON_KEY="anon").check()
    with pytest.raises(ConfigError, match="SUPABASE_URL: 'abcd.supabase.co' is not an https:// URL"):
        settings(SUPABASE_URL="abcd.supabase.co", SUPABASE_SERVICE_ROLE_KEY="k").check()


def test_the_keys_resolve_to_apikey_and_bearer() -> None:
    assert settings(SUPABASE_URL=URL + "/", SUPABASE_SERVICE_ROLE_KEY="s").require_project() == (URL, "s", None)
    anon = settings(SUPABASE_URL=URL, SUPABASE_ANON_KEY="anon-secret", SUPABASE_READER_JWT="jwt-secret")
    assert anon.require_project() == (URL, "anon-secret", "jwt-secret")
    assert "anon-secret" not in repr(anon) and "jwt-secret" not in repr(anon)  # both are secrets


def test_the_client_library_loads_on_first_use_only() -> None:
    # Importing `supabase` takes a second or two: the server and the backend module must not.
    import subprocess
    import sys

    code = (
        "import sys, toolagent.servers.supabase.server, toolagent.servers.supabase.supabase_backend; "
        "print('supabase' in sys.modules, 'postgrest' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert proc.stdout.split() == ["False", "False"]
