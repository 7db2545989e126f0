"""Property-based checks of the live API against its own OpenAPI document (schemathesis).

Every operation gets generated requests, valid and invalid, sent with a valid API key; each
response must be documented (status, content type, headers, body schema), and no response may
be a 5xx except a tool's own failure from executeTool (500 with the execution it belongs to).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from api_harness import LiveServer, User, live_server, probe_servers, provision
from toolagent.api.app import create_app
from toolagent.inputs import InputProblem, check_value, text_problem
from toolagent.mcp.config import ServersConfig

pytestmark = pytest.mark.timeout(300)

MAX_EXAMPLES = 12


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[User, LiveServer]]:
    work = tmp_path_factory.mktemp("api_schemathesis")
    db = f"sqlite+aiosqlite:///{work / 'api.db'}"
    # A basic user: dangerous tools (probe/crash) are refused whatever the fuzzer sends.
    users = provision(db, [("fuzz", "execute_basic", "enterprise")])
    with live_server(work, probe_servers(), db=db,
                     engine_config={"plans": {"enterprise": {"rate_per_minute": 1_000_000}}}) as server:
        yield users["fuzz"], server


#: The operations checked: every route but the event stream, which stays open until its run ends.
COVERED = r"^/(api/|health$|ready$|metrics$)"

# The document the server serves (and scripts/export-openapi writes), built without starting anything.
schema = (schemathesis.openapi.from_dict(create_app(servers=ServersConfig()).openapi())
          .include(path_regex=COVERED).exclude(path_regex=r"/events$"))

#: Bodies whose meaning the schema cannot express: an agent's `yaml` must be a valid definition, and
#: a BUILD's overrides must leave a valid one. Refused with 400 naming the field; checked for the rest.
SEMANTIC_BODIES = {("PUT", "/api/agents/{org}/{slug}"), ("POST", "/api/agents/{org}/{slug}/build")}


@schemathesis.check
def no_server_error_but_tool_failures(ctx: Any, response: Any, case: Any) -> bool | None:
    """5xx only for executeTool's tool failures, which name their execution."""
    if response.status_code < 500:
        return None
    body = json.loads(response.text or "null")
    tool_failure = (case.operation.path == "/api/tools/execute" and response.status_code == 500
                    and isinstance(body, dict) and body.get("error", {}).get("code") == "INTERNAL_SERVER_ERROR"
                    and str((body["error"].get("details") or {}).get("executionId", "")).startswith("exec_"))
    if not tool_failure:
        raise AssertionError(f"{case.operation.label} answered {response.status_code}: {response.text[:500]}")
    return None


def _unstorable(case: Any) -> bool:
    """A request the edge refuses with 400 naming the field though the schema allows it: a NUL or a
    lone surrogate in any string (no store can keep it), an integer past 64 bits, deep nesting."""
    parts = (case.query, case.path_parameters, case.headers)
    if any(text_problem(s) is not None for part in parts for s in _strings(part)):
        return True
    try:
        check_value(case.body if isinstance(case.body, (dict, list, str, int, float)) else None)
    except InputProblem:
        return True
    return False


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_schema(case: Any, live: tuple[User, LiveServer]) -> None:
    user, server = live
    excluded = [schemathesis.checks.not_a_server_error]
    query = case.query or {}
    if case.operation.path == "/api/tools/history" and query.get("startDate") and query.get("endDate"):
        # An empty or reversed date range is refused with 400 naming both fields, a rule the schema
        # cannot express; such cases are still checked for everything else.
        excluded.append(positive_data_acceptance)
    if (case.operation.method.upper(), case.operation.path) in SEMANTIC_BODIES or _unstorable(case):
        excluded.append(positive_data_acceptance)
    case.call_and_validate(
        base_url=server.url, headers=user.auth, timeout=30, excluded_checks=excluded,
        additional_checks=[no_server_error_but_tool_failures],
    )

