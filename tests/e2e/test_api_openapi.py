"""The committed openapi.json is the app's current OpenAPI document."""

from __future__ import annotations

import json
import subprocess

from _support.repo import REPO_ROOT

from toolagent.api.app import create_app
from toolagent.mcp.config import ServersConfig


def test_committed_openapi_is_current() -> None:
    committed = json.loads((REPO_ROOT / "openapi.json").read_text(encoding="utf-8"))
    assert committed == create_app(servers=ServersConfig()).openapi(), (
        "openapi.json is stale: run scripts/export-openapi"
    )


def test_export_script_writes_the_same_document(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "openapi.json"
    subprocess.run([str(REPO_ROOT / "scripts" / "export-openapi"), "--out", str(out)], check=True, capture_output=True)
    assert out.read_text(encoding="utf-8") == (REPO_ROOT / "openapi.json").read_text(encoding="utf-8")
    done = subprocess.run([str(REPO_ROOT / "scripts" / "export-openapi"), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_document_covers_every_procedure() -> None:
    paths = json.loads((REPO_ROOT / "openapi.json").read_text(encoding="utf-8"))["paths"]
    operations = {op["operationId"] for item in paths.values() for op in item.values()}
    assert {
        "listTools",
        "executeTool",
        "getToolStatus",
        "cancelToolExecution",
        "getToolHistory",
        "getToolMetrics",
        "getActiveExecutions",
        "getToolDetails",
    } <= operations
    history = {p["name"]: p for p in paths["/api/tools/history"]["get"]["parameters"]}
    assert history["limit"]["schema"]["maximum"] == 100 and history["limit"]["schema"]["minimum"] == 1


def test_every_returned_duration_says_its_unit() -> None:
    """Each duration field of an answer is named `...Ms`; the older unit-less names are kept for one
    release, marked deprecated, each beside its `...Ms` twin. (Inputs say their unit in their description.)"""
    schemas = create_app(servers=ServersConfig()).openapi()["components"]["schemas"]
    unitless = {"timeout", "executionTime", "runningTime", "averageExecutionTime"}
    seen = 0
    for name, schema in schemas.items():
        if name.endswith("Input"):
            continue
        for field, spec in schema.get("properties", {}).items():
            if field in unitless:
                seen += 1
                assert spec.get("deprecated") is True, (name, field)
                assert f"{field}Ms" in schema["properties"], (name, field)
            elif field.endswith("Ms"):
                assert not spec.get("deprecated"), (name, field)
    assert seen >= 7
