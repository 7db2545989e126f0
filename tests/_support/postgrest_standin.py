"""A small stand-in for PostgREST's RPC endpoint, `POST /rest/v1/rpc/{fn}`, in front of a real
PostgreSQL, for testing the Supabase server's `supabase` backend. PostgREST itself cannot be
installed here (no registry we reach ships it), so this copies only what that backend relies on:

* the gateway's key check (hosted Supabase answers 401 "Invalid API key" to a bad `apikey`) and
  PostgREST's JWT check (HS256 with the project's secret; `Authorization: Bearer`, else `apikey`);
* per request, as PostgREST does: connect as `authenticator` (LOGIN NOINHERIT), `BEGIN` READ
  ONLY for a STABLE or IMMUTABLE function (else READ WRITE), `SET LOCAL ROLE` to the JWT's
  `role`, `request.jwt.claims` and `request.method`/`request.path` set locally, then the role's
  own settings (`ALTER ROLE ... SET`, PostgREST 11.1+) and the function's hoisted ones (`SET
  statement_timeout` on the function, PostgREST 12.2+), each before the call, so they apply to it;
* the function looked up by name in schema public (404 PGRST202 when missing), called with named
  arguments cast to its declared types, its result sent as the body;
* PostgreSQL errors as PostgREST's JSON body (`code`, `message`, `details`, `hint`) with its statuses.

Not copied: tables and views, filters, embedding, Prefer headers, OpenAPI, the schema cache's
reloading, GET calls, pools. Every request is recorded in `requests` for the tests to inspect.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
import jwt
import psycopg
import uvicorn
from psycopg import sql
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

#: Settings PostgREST applies from a function's own SET clauses (`db-hoisted-tx-settings`).
HOISTED = ("statement_timeout", "plan_filter.statement_cost_limit", "default_transaction_isolation")

# PostgREST's HTTP status for a PostgreSQL error class (the ones the backend can meet).
_STATUS = {"42501": 403, "42883": 404, "57014": 500, "25006": 405, "42P01": 404, "P0001": 400}


@dataclass
class StandIn:
    """The app's configuration and what it saw."""

    authenticator_url: str
    """libpq URL of the `authenticator` login role."""
    jwt_secret: str
    anon_role: str = "anon"
    requests: list[dict[str, Any]] = field(default_factory=list)

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/rest/v1/rpc/{fn}", self.rpc, methods=["POST"])])

    def _claims(self, token: str) -> dict[str, Any]:
        return jwt.decode(token, self.jwt_secret, algorithms=["HS256"], options={"verify_aud": False})

    async def rpc(self, request: Request) -> Response:
        body = await request.body()
        return await anyio.to_thread.run_sync(self._rpc, request, body)

    def _rpc(self, request: Request, body: bytes) -> Response:
        fn = request.path_params["fn"]
        self.requests.append({"path": request.url.path, "headers": dict(request.headers), "body": body})
        apikey = request.headers.get("apikey")
        if apikey is None:
            return JSONResponse({"message": "No API key found in request"}, status_code=401)
        try:
            self._claims(apikey)
        except jwt.PyJWTError:
            return JSONResponse(
                {"message": "Invalid API key", "hint": "Double check your Supabase `anon` or `service_role` API key."},
                status_code=401,
            )
        auth = request.headers.get("authorization", "")
        token = auth[7:] if auth.lower().startswith("bearer ") else apikey
        try:
            claims = self._claims(token)
        except jwt.PyJWTError as exc:
            return JSONResponse({"code": "PGRST301", "message": str(exc), "details": None, "hint": None}, 401)
        role = str(claims.get("role") or self.anon_role)
        args = json.loads(body or b"{}")
        try:
            return self._call(fn, args, role, claims, request.url.path)
        except psycopg.Error as exc:
            diag = exc.diag
            state = diag.sqlstate or ""
            status = _STATUS.get(state, 400)
            if state == "42501" and role == self.anon_role:
                status = 401
            payload = {
                "code": state,
                "message": diag.message_primary,
                "details": diag.message_detail,
                "hint": diag.message_hint,
            }
            return JSONResponse(payload, status_code=status)

    def _call(self, fn: str, args: dict[str, Any], role: str, claims: dict[str, Any], path: str) -> Response:
        with psycopg.connect(self.authenticator_url, autocommit=True) as conn:
            found = conn.execute(
                "SELECT p.oid, p.provolatile, p.proconfig, "
                "       coalesce(p.proargnames, '{}'), "
                "       ARRAY(SELECT format_type(t, NULL) FROM unnest(p.proargtypes) t) "
                "FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                "WHERE n.nspname = 'public' AND p.proname = %s",
                [fn],
            ).fetchall()
            matching = [f for f in found if set(args) <= set(f[3])]
            if not matching:
                names = ", ".join(sorted(args))
                return JSONResponse(
                    {
                        "code": "PGRST202",
                        "message": f"Could not find the function public.{fn}({names}) in the schema cache",
                        "details": "Searched for the function public." + fn,
                        "hint": None,
                    },
                    status_code=404,
                )
            _oid, volatility, proconfig, argnames, argtypes = matching[0]
            access = "READ ONLY" if volatility in ("s", "i") else "READ WRITE"
            with conn.transaction():
                conn.execute(f"SET TRANSACTION ISOLATION LEVEL READ COMMITTED, {access}")
                conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role)))
                conn.execute(
                    "SELECT set_config('request.jwt.claims', %s, true), set_config('request.method', 'POST', true), "
                    "set_config('request.path', %s, true)",
                    [json.dumps(claims), path],
                )
                settings = conn.execute(
                    "SELECT unnest(s.setconfig) FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole "
                    "WHERE r.rolname = %s AND s.setdatabase IN (0, (SELECT oid FROM pg_database "
                    "WHERE datname = current_database())) ORDER BY s.setdatabase",
                    [role],
                ).fetchall()
                pairs = [tuple(s.split("=", 1)) for (s,) in settings]
                pairs += [tuple(s.split("=", 1)) for s in proconfig or [] if s.split("=", 1)[0] in HOISTED]
                for name, value in pairs:
                    conn.execute("SELECT set_config(%s, %s, true)", [name, value])
                types = dict(zip(argnames, argtypes, strict=False))
                call = sql.SQL("SELECT public.{}({})::text").format(
                    sql.Identifier(fn),
                    sql.SQL(", ").join(
                        sql.SQL("{} := %s::{}").format(sql.Identifier(name), sql.SQL(types[name])) for name in args
                    ),
                )
                values = [v if isinstance(v, str) or v is None else json.dumps(v) for v in args.values()]
                (result,) = conn.execute(call, values).fetchone()  # type: ignore[misc]
        return Response(result if result is not None else "null", media_type="application/json")


@contextmanager
def serve(standin: StandIn) -> Iterator[str]:
    """Serve the stand-in on 127.0.0.1 in a thread; yields its base URL (the "project URL")."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    # Listening before the server starts: a client connecting early waits in the backlog.
    sock.listen(64)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(standin.app(), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
