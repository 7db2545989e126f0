"""Interpolation: both syntaxes, type preservation, strict missing references, the sandbox."""

from __future__ import annotations

import pytest

from toolagent.errors import TemplateError
from toolagent.interpolation import ParamsTemplate, Template, render_value

CTX = {
    "payload": {"query": "top 10", "n": 10, "tags": ["a", "b"], "filters": {"org": "demo"}, "flag": True},
    "metadata": {"run_id": "run_1", "organization": "demo"},
    "steps": {"supabase/generate-sql": {"sql": "SELECT 1", "tables": ["users"]}},
    "previous": {"sql": "SELECT 1"},
}


@pytest.mark.parametrize("source", ["{{payload.n}}", "<<payload.n>>", "  {{ payload.n }} ", "<< payload.n >>"])
def test_single_reference_keeps_number_type(source: str) -> None:
    assert render_value(source, CTX) == 10


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{{payload.tags}}", ["a", "b"]),
        ("<<payload.filters>>", {"org": "demo"}),
        ("{{payload.flag}}", True),
        ("{{steps['supabase/generate-sql'].sql}}", "SELECT 1"),
        ("<<steps['supabase/generate-sql'].tables>>", ["users"]),
        ("{{previous.sql}}", "SELECT 1"),
        ("{{metadata.run_id}}", "run_1"),
        ("{{payload.tags[1]}}", "b"),
    ],
)
def test_single_reference_keeps_value(source: str, expected: object) -> None:
    assert render_value(source, CTX) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("q: {{payload.query}}!", "q: top 10!"),
        ("n=<<payload.n>> org=<<metadata.organization>>", "n=10 org=demo"),
        ("tags {{payload.tags}}", 'tags ["a", "b"]'),
        ("{{payload.query}}{{payload.n}}", "top 1010"),
        ("flag={{payload.flag}}", "flag=true"),
    ],
)
def test_reference_inside_text_renders_as_text(source: str, expected: str) -> None:
    assert render_value(source, CTX) == expected


def test_missing_reference_names_path_and_template() -> None:
    with pytest.raises(TemplateError) as info:
        render_value("{{payload.missing.deep}}", CTX)
    assert "'payload.missing' is not set" in info.value.message
    assert "{{payload.missing.deep}}" in info.value.message


def test_missing_reference_in_text_is_an_error_not_empty() -> None:
    with pytest.raises(TemplateError):
        render_value("x <<payload.nope>> y", CTX)


def test_missing_step_reference_lists_available_steps() -> None:
    with pytest.raises(TemplateError) as info:
        render_value("{{steps['supabase/execute-sql'].rows}}", CTX)
    assert "available: supabase/generate-sql" in info.value.message


@pytest.mark.parametrize(
    "source",
    [
        "{{ ''.__class__ }}",
        "{{ payload.query.__class__.__mro__ }}",
        "{{ payload.__init__.__globals__ }}",
        "{{ payload.filters.items.__self__ }}",
        "{{ payload.query.format.__globals__ }}",
    ],
)
def test_sandbox_refuses_python_internals(source: str) -> None:
    with pytest.raises(TemplateError):
        render_value(source, CTX)


@pytest.mark.parametrize(
    "source", ["{{ environ }}", "{{ os.environ }}", "{{ range(10) }}", "{{ lipsum() }}", "{{ cycler }}"]
)
def test_no_globals_environment_or_helpers(source: str) -> None:
    with pytest.raises(TemplateError):
        Template.parse(source)


def test_include_of_files_is_not_possible() -> None:
    with pytest.raises(TemplateError):
        render_value("{% include '/etc/passwd' %}", CTX)


def test_params_tree_renders_nested_and_passes_non_strings() -> None:
    params = ParamsTemplate.parse(
        {
            "q": "{{payload.query}}",
            "max_rows": 5,
            "opts": {"tags": "<<payload.tags>>", "on": False},
            "list": ["{{payload.n}}", 1],
        }
    )
    assert params.render(CTX) == {
        "q": "top 10",
        "max_rows": 5,
        "opts": {"tags": ["a", "b"], "on": False},
        "list": [10, 1],
    }
    assert params.references() == {"payload.query", "payload.tags", "payload.n"}


def test_plain_strings_are_not_templates() -> None:
    assert ParamsTemplate.parse({"sql": "SELECT '<' || 'x'"}).render({}) == {"sql": "SELECT '<' || 'x'"}
