"""The optional LLM: an OpenAI-compatible chat completions endpoint.

Used only when every `SUPABASE_LLM_*` setting is given (see `settings.py`). Whatever it
writes is treated like any other untrusted SQL: the server runs it through the same guard
and table checks as the offline generator's output. Failures are errors, never a quiet
fallback to the offline path.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...errors import UpstreamError
from .catalog import Catalog
from .settings import SupabaseSettings

#: Seconds to wait for the LLM endpoint.
LLM_TIMEOUT_S = 60.0

_FENCE = re.compile(r"```(?:sql|postgresql|postgres)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)

SQL_SYSTEM_PROMPT = (
    "You write one PostgreSQL SELECT statement that answers an analytics question. "
    "Use only the tables and columns listed. Never modify data. Always end with LIMIT. "
    "Reply with the SQL only, no explanation."
)
SUMMARY_SYSTEM_PROMPT = (
    "You summarize query results for the reader named in the request, in concise markdown. "
    "Mention the number of rows and the main findings. Use only the statistics given."
)


async def chat(settings: SupabaseSettings, system: str, user: str) -> str:
    """Send one chat completion request and return the reply text.

    Raises:
        UpstreamError: the endpoint failed or answered in an unexpected shape.
    """
    import httpx

    assert settings.llm_endpoint and settings.llm_model and settings.llm_api_key
    url = settings.llm_endpoint.rstrip("/") + "/chat/completions"
    body = {
        "model": settings.llm_model,
        "temperature": 0,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
    }
    headers = {"Authorization": f"Bearer {settings.llm_api_key.get_secret_value()}"}
    try:
        async with httpx.AsyncClient(timeout=LLM_TIMEOUT_S) as client:
            response = await client.post(url, json=body, headers=headers)
            response.raise_for_status()
            data: Any = response.json()
    except httpx.HTTPStatusError as exc:
        raise UpstreamError(f"LLM endpoint answered HTTP {exc.response.status_code}") from exc
    except (httpx.HTTPError, ValueError) as exc:
        raise UpstreamError(f"LLM request failed: {type(exc).__name__}: {exc}") from exc
    try:
        content = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise UpstreamError("LLM response has no choices[0].message.content") from exc
    if not isinstance(content, str) or not content.strip():
        raise UpstreamError("LLM response is empty")
    return content


def extract_sql(text: str) -> str:
    """The SQL in an LLM reply: the first fenced block if any, without a trailing semicolon."""
    match = _FENCE.search(text)
    sql = (match.group(1) if match else text).strip()
    return sql[:-1].rstrip() if sql.endswith(";") else sql


def describe_schema(catalog: Catalog) -> str:
    """The schema as the prompt shows it: columns with types, keys and known values."""
    lines: list[str] = []
    for table in catalog.tables.values():
        cols = []
        for c in table.columns:
            extra = " primary key" if c.name in table.primary_key else ""
            if c.references is not None:
                extra += f" references {c.references[0]}({c.references[1]})"
            values = catalog.values.get((table.name, c.name))
            if values and len(values) <= 12:
                extra += f" values: {', '.join(values)}"
            cols.append(f"  {c.name} {c.type}{extra}")
        lines.append(f"table {table.name} (~{table.row_count} rows):\n" + "\n".join(cols))
    return "\n".join(lines)


def sql_prompt(question: str, catalog: Catalog, max_rows: int) -> str:
    """The user message asking for SQL."""
    return (
        f"Schema:\n{describe_schema(catalog)}\n\n"
        f"Question: {question}\n"
        f"Return at most {max_rows} rows (LIMIT {max_rows} unless the question asks for fewer)."
    )


def summary_prompt(request: str, stats: dict[str, Any], row_count: int) -> str:
    """The user message asking for a summary of result statistics."""
    return f"Request: {request}\nRows: {row_count}\nStatistics (JSON):\n{json.dumps(stats, default=str)[:20000]}"
