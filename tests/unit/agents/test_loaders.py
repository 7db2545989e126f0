"""Loaders: YAML files, seed JSON (one record or a list) and records all give the same definition."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from _support.factories import make_definition
from _support.repo import REPO_ROOT

from toolagent.agents import load_path, load_record
from toolagent.errors import DefinitionInvalid

SEED = REPO_ROOT / "seeds" / "demo_supabase_agent.json"
YAML_FILE = REPO_ROOT / "agents" / "supabase-agent.yaml"


def test_seed_record_and_yaml_file_are_the_same_agent_but_for_the_question() -> None:
    [from_seed] = load_path(SEED)
    [from_yaml] = load_path(YAML_FILE)
    # The seed is the PRD's record; the file also reads the question from the payload and lets
    # generate-sql use every allowed table (tests/unit/test_supabase_seed_record.py checks both).
    seed, file = from_seed.definition.model_dump(), from_yaml.definition.model_dump()
    seed_sql = seed["configuration"]["toolParams"].pop("supabase/generate-sql")
    file_sql = file["configuration"]["toolParams"].pop("supabase/generate-sql")
    assert seed == file
    assert {**seed_sql, "query": "{{payload.query}}", "tables": file_sql["tables"]} == file_sql
    assert from_seed.ref == from_yaml.ref == "demo/supabase-agent"
    assert from_seed.definition.configuration.tools == [
        "supabase/get-schema",
        "supabase/generate-sql",
        "supabase/execute-sql",
        "supabase/analyze-results",
    ]


def test_seed_record_keeps_prd_fields() -> None:
    [agent] = load_path(SEED)
    rec = agent.record
    assert (rec.organization_slug, rec.slug, rec.agent_type, rec.mode_profile, rec.status, rec.version) == (
        "demo",
        "supabase-agent",
        "tool",
        "tool_full",
        "active",
        "0.1.0",
    )
    assert json.loads(rec.yaml)["metadata"]["name"] == "supabase-agent"


def test_list_of_records_loads_each(tmp_path: Path) -> None:
    record = json.loads(SEED.read_text())
    second = {**record, "slug": "other", "yaml": yaml.safe_dump(make_definition())}
    path = tmp_path / "many.json"
    path.write_text(json.dumps([record, second]))
    assert [a.ref for a in load_path(path)] == ["demo/supabase-agent", "demo/other"]


def test_record_missing_required_field_names_it(tmp_path: Path) -> None:
    record = json.loads(SEED.read_text())
    del record["mode_profile"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(record))
    with pytest.raises(DefinitionInvalid) as info:
        load_path(path)
    assert [(p.path, p.message) for p in info.value.problems] == [("mode_profile", "required field is missing")]
    assert str(path) in info.value.message


def test_invalid_definition_inside_list_is_located(tmp_path: Path) -> None:
    record = json.loads(SEED.read_text())
    bad = {**record, "slug": "bad", "yaml": json.dumps(make_definition(tools=["bare"], toolParams={}))}
    path = tmp_path / "list.json"
    path.write_text(json.dumps([record, bad]))
    with pytest.raises(DefinitionInvalid) as info:
        load_path(path)
    [problem] = info.value.problems
    assert problem.path == "[1].configuration.tools[0]"
    assert problem.message == "Tool 'bare' must include namespace: expected 'namespace/tool'"


def test_yaml_column_may_hold_yaml(tmp_path: Path) -> None:
    [seeded] = load_path(SEED)
    as_yaml = seeded.record.model_copy(update={"yaml": YAML_FILE.read_text()})
    assert load_record(as_yaml).definition == load_path(YAML_FILE)[0].definition


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DefinitionInvalid) as info:
        load_path(tmp_path / "nope.yaml")
    assert "cannot read file" in info.value.message


def test_bare_definition_gets_a_record(tmp_path: Path) -> None:
    path = tmp_path / "probe.yaml"
    path.write_text(yaml.safe_dump(make_definition()))
    [agent] = load_path(path, org="acme")
    assert agent.ref == "acme/probe"
    assert agent.record.display_name == "Probe"
