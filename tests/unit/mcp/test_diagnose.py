"""Reading why a server failed: stderr summaries and HTTP error answers."""

from __future__ import annotations

import pytest

from toolagent.mcp.diagnose import HttpFailure, stderr_summary

NODE_MISSING = """node:internal/modules/cjs/loader:1228
  throw err;
  ^

Error: Cannot find module '/srv/server.js'
    at Module._resolveFilename (node:internal/modules/cjs/loader:1225:15)
    at Module._load (node:internal/modules/cjs/loader:1051:27)
    at Function.executeUserEntryPoint [as runMain] (node:internal/modules/run_main:174:12)
    at node:internal/main/run_main_module:28:49 {
  code: 'MODULE_NOT_FOUND',
  requireStack: []
}

Node.js v20.20.2
"""


def test_node_missing_module_keeps_the_error_and_first_frame() -> None:
    assert stderr_summary(NODE_MISSING) == "\n".join(
        [
            "…",
            "Error: Cannot find module '/srv/server.js'",
            "at Module._resolveFilename (node:internal/modules/cjs/loader:1225:15)",
            "…",
            "  code: 'MODULE_NOT_FOUND',",
            "  requireStack: []",
            "}",
            "Node.js v20.20.2",
        ]
    )


def test_python_traceback_keeps_the_exception_line() -> None:
    text = (
        "Traceback (most recent call last):\n"
        + '  File "x.py", line 1\n' * 30
        + "ModuleNotFoundError: No module named 'foo'\n"
    )
    summary = stderr_summary(text)
    assert summary.splitlines()[0] == "Traceback (most recent call last):"
    assert summary.endswith("ModuleNotFoundError: No module named 'foo'")
    assert len(summary.splitlines()) <= 8


def test_quiet_stderr_keeps_the_last_lines() -> None:
    assert stderr_summary("one\ntwo\nthree\nfour\n") == "…\ntwo\nthree\nfour"
    assert stderr_summary("") == ""


def _failure(status: int, line: str = "", had_session: bool = True) -> HttpFailure:
    return HttpFailure(
        seq=1,
        url="http://h/mcp",
        status=status,
        first_line=line,
        method="tools/call",
        tool="t",
        had_session=had_session,
    )


@pytest.mark.parametrize(
    ("failure", "refused"),
    [
        (_failure(404, "Session not found"), True),
        (_failure(400, "Bad Request: Server not initialized"), True),
        (_failure(400, "Bad Request: No valid session ID provided"), True),
        (_failure(404, "Not Found", had_session=False), False),  # no session yet: a wrong URL
        (_failure(400, "Invalid JSON"), False),
        (_failure(403, "Access is only allowed at localhost:8931"), False),
        (_failure(500, "session store down"), False),
    ],
)
def test_only_a_refused_session_is_resent(failure: HttpFailure, refused: bool) -> None:
    assert failure.session_refused is refused


def test_describe_names_url_status_and_line() -> None:
    assert _failure(403, "Access denied").describe() == "HTTP 403 from http://h/mcp: Access denied"
