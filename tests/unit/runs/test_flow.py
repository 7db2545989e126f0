"""What flows between steps: result views, implicit chaining sources, caps."""

from __future__ import annotations

from toolagent.model.spec import ToolResult, ToolSpec
from toolagent.runs.flow import FlowCap, fill_required, result_view

SPEC = ToolSpec(
    name="db/run",
    server="db",
    tool="run",
    input_schema={"type": "object", "properties": {"sql": {}, "limit": {}, "rows": {}}, "required": ["sql", "rows"]},
)


def test_explicit_params_win_over_previous_and_payload() -> None:
    args, sources = fill_required(SPEC, {"sql": "SELECT 1"}, "db/gen", {"sql": "SELECT 2", "rows": [1]}, {"sql": "x"})
    assert args == {"sql": "SELECT 1", "rows": [1]}
    assert sources == {"sql": "params", "rows": "previous:db/gen.rows"}


def test_payload_fills_what_the_previous_step_lacks() -> None:
    args, sources = fill_required(SPEC, {}, "db/gen", {"other": 1}, {"sql": "SELECT 3", "rows": []})
    assert args == {"sql": "SELECT 3", "rows": []}
    assert sources == {"sql": "payload.sql", "rows": "payload.rows"}


def test_optional_arguments_are_never_filled() -> None:
    args, _ = fill_required(SPEC, {"sql": "s", "rows": []}, "db/gen", {"limit": 5}, {"limit": 7})
    assert "limit" not in args


def test_first_step_has_no_previous() -> None:
    args, sources = fill_required(SPEC, {}, None, {}, {})
    assert args == {} and sources == {}


def test_result_view_keeps_structured_fields_and_puts_text_content_status_under_result() -> None:
    result = ToolResult(
        False, {"sql": "S", "status": "tool's own", "content": "file body"}, [{"type": "text", "text": "t"}], "t"
    )
    view = result_view(result, "success", FlowCap())
    assert view == {
        "sql": "S",
        "status": "tool's own",
        "content": "file body",
        "_result": {"text": "t", "content": [{"type": "text", "text": "t"}], "status": "success", "isError": False},
    }


def test_implicit_chaining_never_takes_content_blocks_text_or_status() -> None:
    spec = ToolSpec(
        name="fs/write_file",
        server="fs",
        tool="write_file",
        input_schema={
            "type": "object",
            "required": ["path", "content"],
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        },
    )
    unstructured = result_view(
        ToolResult(False, None, [{"type": "text", "text": "page"}], "page"), "success", FlowCap()
    )
    args, sources = fill_required(spec, {"path": "out.md"}, "fetch/fetch", unstructured, {"content": "from payload"})
    assert args == {"path": "out.md", "content": "from payload"}
    assert sources == {"path": "params", "content": "payload.content"}


def test_cap_cuts_lists_and_strings_but_not_numbers() -> None:
    cap = FlowCap(max_items=2, max_chars=5)
    assert cap.apply({"rows": [1, 2, 3], "s": "abcdefgh", "n": 123456789}) == {
        "rows": [1, 2],
        "s": "abcde… [3 more chars]",
        "n": 123456789,
    }


def test_caps_come_from_the_settings() -> None:
    from toolagent.settings import Settings

    assert FlowCap.from_settings(Settings.from_env({"TOOLAGENT_FLOW_MAX_ITEMS": "5"})) == FlowCap(max_items=5)
    assert FlowCap.from_settings(Settings.defaults()) == FlowCap()


def test_bad_cap_names_the_variable() -> None:
    import pytest

    from toolagent.errors import UsageError
    from toolagent.settings import Settings

    with pytest.raises(UsageError, match="TOOLAGENT_FLOW_MAX_CHARS must be a positive integer"):
        Settings.from_env({"TOOLAGENT_FLOW_MAX_CHARS": "-3"})
