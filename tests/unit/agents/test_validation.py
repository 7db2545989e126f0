"""Fail-fast validation of agent definitions: contract messages, typos, enums, templates, syntax."""

from __future__ import annotations

import json

import pytest
import yaml
from _support.factories import make_definition

from toolagent.agents import load_definition_text, validate_definition
from toolagent.agents.models import ExecutionMode
from toolagent.errors import DefinitionInvalid


def problems(data: object) -> list[tuple[str, str]]:
    with pytest.raises(DefinitionInvalid) as info:
        validate_definition(data)
    return [(p.path, p.message) for p in info.value.problems]


def test_valid_definition_fills_defaults() -> None:
    defn = validate_definition(make_definition())
    assert defn.configuration.toolExecutionMode is ExecutionMode.SEQUENTIAL
    assert defn.configuration.stopOnError is True
    assert defn.configuration.deliverable.format.value == "json"
    assert defn.configuration.security.denied_operations == ["DROP", "TRUNCATE", "ALTER", "DELETE", "UPDATE"]


@pytest.mark.parametrize("tools", [[], None])
def test_no_tools_uses_prd_message(tools: object) -> None:
    data = make_definition(tools=tools) if tools is not None else make_definition()
    if tools is None:
        del data["configuration"]["tools"]
        del data["configuration"]["toolParams"]
    else:
        data["configuration"]["toolParams"] = {}
    assert ("configuration.tools", "No tools configured for this agent") in problems(data)


def test_missing_namespace_uses_prd_message() -> None:
    found = problems(make_definition(tools=["get-schema", "demo/add"], toolParams={}))
    assert found == [("configuration.tools[0]", "Tool 'get-schema' must include namespace: expected 'namespace/tool'")]


@pytest.mark.parametrize("bad", ["/tool", "ns/", "a/b/c"])
def test_malformed_namespaces_are_rejected(bad: str) -> None:
    found = problems(make_definition(tools=[bad], toolParams={}))
    assert found == [("configuration.tools[0]", f"Tool '{bad}' must include namespace: expected 'namespace/tool'")]


def test_typo_in_configuration_names_nearest_key() -> None:
    data = make_definition()
    data["configuration"]["stopOnEror"] = False
    assert problems(data) == [("configuration.stopOnEror", "unknown key 'stopOnEror'; did you mean 'stopOnError'?")]


def test_typo_in_nested_block_names_nearest_key() -> None:
    data = make_definition(security={"denied_operation": ["DROP"]})
    assert problems(data) == [
        ("configuration.security.denied_operation", "unknown key 'denied_operation'; did you mean 'denied_operations'?")
    ]


def test_unknown_mode_lists_valid_values() -> None:
    found = problems(make_definition(toolExecutionMode="paralel"))
    assert found == [
        ("configuration.toolExecutionMode", "invalid toolExecutionMode 'paralel': expected one of sequential, parallel")
    ]


def test_unknown_deliverable_format_lists_valid_values() -> None:
    found = problems(make_definition(deliverable={"format": "pdf", "type": "x"}))
    assert found == [("configuration.deliverable.format", "invalid format 'pdf': expected one of json, markdown, text")]


def test_tool_params_key_must_be_a_configured_tool() -> None:
    found = problems(make_definition(toolParams={"demo/ecko": {"text": "hi"}}))
    assert found == [
        (
            "configuration.toolParams.demo/ecko",
            "toolParams key 'demo/ecko' is not one of the configured tools; did you mean 'demo/echo'?",
        )
    ]


def test_malformed_template_fails_at_load_with_its_path() -> None:
    found = problems(make_definition(toolParams={"demo/echo": {"text": "{{ payload. }}"}}))
    assert len(found) == 1
    assert found[0][0] == "configuration.toolParams.demo/echo.text"
    assert "malformed template" in found[0][1]


def test_unknown_template_root_fails_at_load() -> None:
    found = problems(make_definition(toolParams={"demo/echo": {"text": "<<secrets.key>>"}}))
    assert "unknown name 'secrets'" in found[0][1]


def test_every_problem_is_reported_at_once() -> None:
    data = make_definition(
        tools=["bare", "x/y"],
        toolParams={"nope/z": {}},
    )
    data["configuration"]["deliverable"] = {"format": "json", "type": "t"}
    found = problems(data)
    assert {p for p, _ in found} == {"configuration.tools[0]", "configuration.toolParams.nope/z"}


def test_malformed_yaml_reports_line_and_column() -> None:
    with pytest.raises(DefinitionInvalid) as info:
        load_definition_text("metadata:\n  name: x\nconfiguration: [unclosed\n", source="a.yaml")
    assert "a.yaml" in info.value.message
    assert "malformed YAML at line" in info.value.message and "column" in info.value.message


def test_malformed_json_reports_line_and_column() -> None:
    with pytest.raises(DefinitionInvalid) as info:
        load_definition_text('{\n  "metadata": {"name": "x"},\n  "configuration": {,}\n}')
    assert "malformed JSON at line 3, column 21" in info.value.message


def test_yaml_and_json_text_give_the_same_definition() -> None:
    data = make_definition()
    assert load_definition_text(yaml.safe_dump(data)) == load_definition_text(json.dumps(data))


def test_empty_document_is_rejected() -> None:
    assert problems(None)[0][1].startswith("expected a mapping")
