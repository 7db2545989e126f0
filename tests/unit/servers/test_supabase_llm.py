"""The optional LLM path against a fake OpenAI-compatible endpoint on 127.0.0.1.

The fake stands in for a cloud API. Whatever it answers is checked like any other SQL: the
guard rejects a DELETE, and tables outside those given are refused.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from toolagent.servers.supabase import SupabaseSettings, build_server
from toolagent.servers.supabase.demo_data import ensure_sqlite_demo

pytestmark = pytest.mark.anyio


class FakeLLM:
    """Answers each chat completion with the next queued reply; keeps the requests."""

    def __init__(self) -> None:
        self.replies: list[str] = []
        self.requests: list[dict[str, Any]] = []
        self.status = 200
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 — http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
                reply = fake.replies.pop(0) if fake.replies else ""
                payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": reply}}]}).encode()
                self.send_response(fake.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> FakeLLM:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture()
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_sqlite_demo(tmp_path_factory.mktemp("supabase") / "demo.sqlite")


def llm_settings(demo_db: Path, fake: FakeLLM) -> SupabaseSettings:
    return SupabaseSettings.from_env(
        {
            "SUPABASE_DEMO_DB": str(demo_db),
            "SUPABASE_ALLOWED_TABLES": "agent_conversations,kpi_data,kpi_metrics,users",
            "SUPABASE_LLM_PROVIDER": "openai-compatible",
            "SUPABASE_LLM_MODEL": "fake-model",
            "SUPABASE_LLM_ENDPOINT": fake.url,
            "SUPABASE_LLM_API_KEY": "test-key",
        }
    )


async def test_llm_sql_is_guarded_and_limited(demo_db: Path, fake_llm: FakeLLM) -> None:
    fake_llm.replies.append("```sql\nSELECT status, count(*) AS n FROM agent_conversations GROUP BY status;\n```")
    async with Client(build_server(llm_settings(demo_db, fake_llm))) as client:
        result = await client.call_tool(
            "generate-sql", {"query": "conversations by status", "tables": ["agent_conversations"], "max_rows": 7}
        )
        assert not result.is_error, result.content
        out = result.structured_content or {}
        assert out["tables"] == ["agent_conversations"]
        assert out["sql"].rstrip().endswith("LIMIT 7")
        assert "fake-model" in out["explanation"]
        rows = await client.call_tool("execute-sql", {"sql": out["sql"]})
        assert (rows.structured_content or {})["row_count"] == 4
    request = fake_llm.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["auth"] == "Bearer test-key"
    assert request["body"]["model"] == "fake-model"
    prompt = request["body"]["messages"][1]["content"]
    assert "agent_conversations" in prompt and "conversations by status" in prompt
    assert "table users" not in prompt  # only the tables the call may use


async def test_llm_delete_is_rejected_by_the_guard(demo_db: Path, fake_llm: FakeLLM) -> None:
    fake_llm.replies.append("DELETE FROM users")
    async with Client(build_server(llm_settings(demo_db, fake_llm))) as client:
        result = await client.call_tool("generate-sql", {"query": "remove all users"})
        count = await client.call_tool("execute-sql", {"sql": "SELECT count(*) AS n FROM users"})
    assert result.is_error
    assert "rejected by the SQL guard" in result.content[0].text  # type: ignore[union-attr]
    assert "DELETE" in result.content[0].text  # type: ignore[union-attr]
    assert (count.structured_content or {})["rows"] == [{"n": 240}]


async def test_llm_sql_outside_the_tables_given_fails(demo_db: Path, fake_llm: FakeLLM) -> None:
    fake_llm.replies.append("SELECT email FROM users LIMIT 5")
    async with Client(build_server(llm_settings(demo_db, fake_llm))) as client:
        result = await client.call_tool("generate-sql", {"query": "emails", "tables": ["agent_conversations"]})
    assert result.is_error
    assert "users" in result.content[0].text  # type: ignore[union-attr]


async def test_llm_summary(demo_db: Path, fake_llm: FakeLLM) -> None:
    fake_llm.replies.append("**2 rows.** Support leads.")
    async with Client(build_server(llm_settings(demo_db, fake_llm))) as client:
        result = await client.call_tool(
            "analyze-results",
            {"rows": [{"agent": "support", "n": 3}, {"agent": "sales", "n": 1}], "analysis_prompt": "for stakeholders"},
        )
    out = result.structured_content or {}
    assert out["summary"] == "**2 rows.** Support leads."
    assert out["stats"]["row_count"] == 2
    assert "for stakeholders" in fake_llm.requests[0]["body"]["messages"][1]["content"]


async def test_llm_failure_is_a_tool_error_not_a_fallback(demo_db: Path, fake_llm: FakeLLM) -> None:
    fake_llm.status = 500
    async with Client(build_server(llm_settings(demo_db, fake_llm))) as client:
        result = await client.call_tool("generate-sql", {"query": "how many users"})
    assert result.is_error and "HTTP 500" in result.content[0].text  # type: ignore[union-attr]
