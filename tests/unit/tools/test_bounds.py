"""Byte bounds on results and deliverables: the bounded form is valid JSON of the same shape,
under the cap, says `truncated` with the cap and the full size, and keeps leading rows."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolagent.model.bounds import bound_deliverable, bound_result, bound_result_json, fit, fit_each, json_size
from toolagent.model.spec import ToolResult

CAP = 4096


def _rows(n: int, width: int = 40) -> list[dict[str, Any]]:
    return [{"id": i, "email": f"user{i}@example.com", "note": "é" * width} for i in range(n)]


def _result(structured: dict[str, Any] | None, text: str) -> ToolResult:
    return ToolResult(False, structured, [{"type": "text", "text": text}], text)


#: (name, result) — each is far over CAP.
HUGE = [
    (
        "rows as structured content and text",
        _result({"rows": _rows(2000), "row_count": 2000}, json.dumps({"rows": _rows(2000)})),
    ),
    ("one huge text block", _result(None, "x" * 5_000_000)),
    ("one huge value in one row", _result({"rows": [{"v": "y" * 3_000_000}]}, "")),
    ("non-ASCII text", _result(None, "漢字" * 200_000)),
    ("escapes in text", _result(None, '\u0001"\\' * 200_000)),
    (
        "an image block",
        ToolResult(False, None, [{"type": "image", "mimeType": "image/png", "data": "A" * 2_000_000}], ""),
    ),
]


@pytest.mark.parametrize(("name", "result"), HUGE, ids=[h[0] for h in HUGE])
def test_a_huge_result_is_bounded(name: str, result: ToolResult) -> None:
    bounded = bound_result(result, CAP)
    assert bounded is not None and bounded is not result
    stored = bounded.to_json()
    encoded = json.dumps(stored, ensure_ascii=False, separators=(",", ":"))
    assert len(encoded.encode()) <= CAP
    assert stored["truncated"] == {"maxBytes": CAP, "sizeBytes": json_size(result.to_json())}
    assert json.loads(encoded) == stored  # valid JSON, same shape
    assert isinstance(stored["content"], list) and isinstance(stored["text"], str)
    assert ToolResult.from_json(stored) == bounded  # the marker survives a store round trip


def test_rows_keep_their_leading_whole_rows_and_small_fields() -> None:
    rows = _rows(2000)
    bounded = bound_result(_result({"rows": rows, "row_count": 2000, "columns": ["id", "email", "note"]}, ""), CAP)
    assert bounded is not None and bounded.structured is not None
    kept = bounded.structured["rows"]
    assert 0 < len(kept) < 2000 and kept == rows[: len(kept)]
    assert bounded.structured["row_count"] == 2000 and bounded.structured["columns"] == ["id", "email", "note"]


def test_a_text_prefix_is_kept() -> None:
    text = "".join(f"line {i}\n" for i in range(100_000))
    bounded = bound_result(_result(None, text), CAP)
    assert bounded is not None and bounded.text and text.startswith(bounded.text)


def test_a_small_result_is_left_alone() -> None:
    small = _result({"rows": _rows(3)}, "three rows")
    assert bound_result(small, CAP) is small
    assert bound_result(None, CAP) is None
    assert bound_result_json(small.to_json(), CAP) == small.to_json()


def test_bounding_again_keeps_the_first_full_size() -> None:
    result = _result(None, "z" * 100_000)
    once = bound_result(result, 50_000)
    twice = bound_result(once, CAP)
    assert once is not None and twice is not None
    assert twice.truncated == {"maxBytes": CAP, "sizeBytes": json_size(result.to_json())}


@pytest.mark.parametrize("budget", [0, 1, 2, 10, 100, 1000])
def test_fit_stays_within_tiny_budgets(budget: int) -> None:
    value = {"a": "x" * 500, "b": list(range(300)), "c": {"d": "é" * 300}}
    assert json_size(fit(value, budget)) <= max(budget, json_size({"a": "", "b": [], "c": {"d": ""}}))


def test_fit_each_gives_every_item_a_share() -> None:
    items = [{"tool": f"t{i}", "text": "w" * 100_000} for i in range(4)]
    kept = fit_each(items, 8000)
    assert [k["tool"] for k in kept] == ["t0", "t1", "t2", "t3"]
    assert all(0 < len(k["text"]) < 3000 for k in kept)
    assert json_size(kept) <= 8000


def _deliverable(fmt: str, results: list[dict[str, Any]]) -> tuple[dict[str, Any], Any]:
    metadata = {"runId": "run_1", "status": "success"}
    data = {"agent": "demo/a", "runId": "run_1", "status": "success", "error": None, "results": results}

    def render(d: dict[str, Any], m: dict[str, Any]) -> str:
        if fmt == "json":
            return json.dumps({"metadata": m, **d}, indent=2)
        return "\n".join(f"## {r['tool']}\n{r['text']}" for r in d["results"]) + (
            "\ntruncated\n" if "truncated" in m else ""
        )

    return {"id": "dlv_1", "format": fmt, "content": render(data, metadata), "data": data, "metadata": metadata}, render


@pytest.mark.parametrize("fmt", ["json", "markdown"])
def test_a_deliverable_is_bounded_with_every_step_kept(fmt: str) -> None:
    results = [
        {"tool": f"s/t{i}", "status": "success", "structuredContent": {"rows": _rows(3000)}, "text": "q" * 300_000}
        for i in range(3)
    ]
    row, render = _deliverable(fmt, results)
    full = len(row["content"].encode()) + json_size(row["data"]) + json_size(row["metadata"])
    cap = 64 * 1024
    bounded = bound_deliverable(row, cap, render)
    size = len(bounded["content"].encode()) + json_size(bounded["data"]) + json_size(bounded["metadata"])
    assert size <= cap
    assert bounded["metadata"]["truncated"] == {"maxBytes": cap, "sizeBytes": full}
    assert [r["tool"] for r in bounded["data"]["results"]] == ["s/t0", "s/t1", "s/t2"]
    assert all(
        r["structuredContent"]["rows"] == _rows(3000)[: len(r["structuredContent"]["rows"])]
        for r in bounded["data"]["results"]
    )
    if fmt == "json":
        assert json.loads(bounded["content"])["metadata"]["truncated"]["sizeBytes"] == full


def test_a_small_deliverable_is_left_alone() -> None:
    row, render = _deliverable("json", [{"tool": "s/t", "status": "success", "structuredContent": None, "text": "ok"}])
    assert bound_deliverable(row, 64 * 1024, render) is row


#: Values and caps: the quick check never says "within" for a value over the cap.
QUICK = [
    ("x" * 100, 100),
    ("\u0001" * 100, 600),
    ({"a": ["é" * 50] * 10}, 1200),
    (list(range(1000)), 10_000),
    ({"k" * 40: None}, 250),
    (10**30, 100),
    (1.5e300, 40),
]


@pytest.mark.parametrize(("value", "cap"), QUICK)
def test_the_quick_check_is_an_upper_bound(value: Any, cap: int) -> None:
    from toolagent.model.bounds import surely_within

    if surely_within(value, cap):
        assert json_size(value) <= cap
    assert surely_within({"rows": _rows(5)}, 1 << 20)


def test_the_deliverable_of_an_interrupted_run_is_bounded() -> None:
    from datetime import UTC, datetime
    from types import SimpleNamespace

    from toolagent.runs.deliverable import interrupted_deliverable

    now = datetime.now(UTC)
    run = SimpleNamespace(
        id="run_1",
        organization_slug="demo",
        agent_slug="a",
        agent_version="1",
        execution_mode="sequential",
        stop_on_error=True,
        started_at=now,
    )
    huge = {"isError": False, "structuredContent": {"rows": _rows(5000)}, "content": [], "text": "t" * 500_000}
    steps = [
        SimpleNamespace(
            tool=f"s/t{i}",
            status="success",
            params={},
            param_sources={},
            result=huge,
            error=None,
            duration_ms=1.0,
            position=i,
        )
        for i in range(3)
    ]
    row = interrupted_deliverable(
        run, steps, error="interrupted: gone", ended_at=now, duration_ms=5.0, max_bytes=64 * 1024
    )
    assert len(row["content"].encode()) + json_size(row["data"]) + json_size(row["metadata"]) <= 64 * 1024
    assert row["metadata"]["truncated"]["maxBytes"] == 64 * 1024 and row["metadata"]["interrupted"] is True
    assert json.loads(row["content"])["metadata"]["truncated"] == row["metadata"]["truncated"]
    assert row["content"].endswith("}\n")
    assert [r["tool"] for r in row["data"]["results"]] == ["s/t0", "s/t1", "s/t2"]


def test_results_together_get_fair_shares() -> None:
    from toolagent.model.bounds import bound_each_result

    big = _result({"rows": _rows(3000)}, "").to_json()
    steps = [{"position": i, "tool": f"s/t{i}", "result": big if i else None} for i in range(5)]
    kept = bound_each_result(steps, 64 * 1024)
    assert [s["position"] for s in kept] == [0, 1, 2, 3, 4] and kept[0]["result"] is None
    assert json_size([s["result"] for s in kept]) <= 64 * 1024
    assert all(s["result"]["truncated"]["sizeBytes"] == json_size(big) for s in kept[1:])
    small = [{"result": _result(None, "ok").to_json()}]
    assert bound_each_result(small, 64 * 1024) == small
