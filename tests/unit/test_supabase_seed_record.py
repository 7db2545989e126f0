"""The seeded demo/supabase-agent is the Tool Agent PRD's record as written, and what that record
does not carry (the question, every demo table) comes from the BUILD request, as the PRD's own
example payload does.

`tests/fixtures/prd_demo_supabase_agent.json` is a copy of the JSON block in the PRD's section
"10) Demo Supabase Tool Agent — JSON for Seeding"; the specification lives outside this
repository, so the copy is what CI compares with. Change it only when the PRD changes.
"""

from __future__ import annotations

import json
from typing import Any

from _support.repo import REPO_ROOT

from toolagent.agents.loaders import load_path
from toolagent.data import demo_payload_file, seed_files
from toolagent.runs.plan import plan_build

PRD_RECORD = REPO_ROOT / "tests" / "fixtures" / "prd_demo_supabase_agent.json"
SEED = REPO_ROOT / "seeds" / "demo_supabase_agent.json"
DEMO_TABLES = ["agent_conversations", "kpi_data", "kpi_metrics", "users"]


def read(path: Any) -> dict[str, Any]:
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def test_the_shipped_seed_is_the_prd_record() -> None:
    prd, seed = read(PRD_RECORD), read(SEED)
    assert {k: v for k, v in seed.items() if k != "yaml"} == {k: v for k, v in prd.items() if k != "yaml"}
    # The yaml column holds a JSON document: equal as JSON, whatever its spacing.
    assert json.loads(seed["yaml"]) == json.loads(prd["yaml"])
    generate = json.loads(seed["yaml"])["configuration"]["toolParams"]["supabase/generate-sql"]
    assert generate == {"tables": ["agent_conversations"], "max_rows": 100}


def test_the_packaged_seed_is_the_same_file() -> None:
    [packaged] = [p for p in seed_files() if p.name == "demo_supabase_agent.json"]
    assert packaged.read_bytes() == SEED.read_bytes()


def test_the_demo_request_supplies_the_question_and_the_tables() -> None:
    [agent] = load_path(SEED)
    overrides = read(demo_payload_file())
    params = plan_build(agent, overrides).definition.configuration.toolParams
    assert params["supabase/generate-sql"] == {
        "query": "top 10 conversations by date", "tables": DEMO_TABLES, "max_rows": 10,
    }  # fmt: skip
    assert params["supabase/execute-sql"] == {"max_rows": 100}
    # Without overrides the seed's own values stand, with no question: the request must give one.
    plain = plan_build(agent).definition.configuration.toolParams["supabase/generate-sql"]
    assert "query" not in plain and plain["tables"] == ["agent_conversations"]
