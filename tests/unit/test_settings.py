"""Settings: every environment variable is declared in a settings model, and the manual's
variable tables list exactly those."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from _support.repo import REPO_ROOT

from toolagent.errors import UsageError
from toolagent.servers.supabase.settings import SupabaseSettings
from toolagent.settings import Settings, user_data_dir

_NAME = re.compile(r"`([A-Z][A-Z0-9_]+)`")


def documented_variables() -> set[str]:
    """The names in the first column of every table of README.md and docs/ whose header starts with
    `variable`."""
    names: set[str] = set()
    in_table = False
    pages = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
    lines = [line for page in pages for line in ["", *page.read_text(encoding="utf-8").splitlines()]]
    for line in lines:
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if not cells:
            in_table = False
        elif cells[0] == "variable":
            in_table = True
        elif in_table and not set(cells[0]) <= set("-: "):
            names.update(_NAME.findall(cells[0]))
    return names


def test_the_manual_tables_list_exactly_the_declared_variables() -> None:
    declared = set(Settings.env_names()) | set(SupabaseSettings.env_names())
    assert documented_variables() == declared


def test_settings_read_the_process_environment_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLAGENT_USER", "bob")
    monkeypatch.setenv("TOOLAGENT_FLOW_MAX_ITEMS", "")  # empty counts as unset
    settings = Settings.from_env()
    assert (settings.user, settings.flow_max_items) == ("bob", None)
    # A mapping given by the caller is read instead of the process environment, not on top of it.
    assert Settings.from_env({"TOOLAGENT_FLOW_MAX_ITEMS": "7"}).user is None


def test_a_malformed_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLAGENT_FLOW_MAX_CHARS", "lots")
    with pytest.raises(UsageError, match="TOOLAGENT_FLOW_MAX_CHARS must be a positive integer, got 'lots'"):
        Settings.from_env()


def test_supabase_settings_take_the_comma_list_and_the_demo_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUPABASE_ALLOWED_TABLES", "users, messages,")
    monkeypatch.setenv("SUPABASE_DEMO_DB", "/tmp/demo.sqlite")
    settings = SupabaseSettings.from_env()
    assert settings.allowed_tables == ("users", "messages")
    assert str(settings.demo_db_path) == "/tmp/demo.sqlite"


def test_settings_exported_for_child_processes_are_read_back_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolagent.settings import export_for_children

    # Set first, so that monkeypatch restores both variables whatever the export writes.
    monkeypatch.setenv("TOOLAGENT_EXECUTION", "inprocess")
    monkeypatch.setenv("TOOLAGENT_LOG_LEVEL", "info")
    export_for_children(execution="queue", log_level=None)
    settings = Settings.from_env()
    assert settings.execution == "queue" and settings.log_level == "info"  # None leaves a variable alone
    with pytest.raises(KeyError, match="no setting named 'databse_url'"):
        export_for_children(databse_url="x")


@pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="the XDG layout is the one of Linux and other Unixes")
@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"XDG_DATA_HOME": "/data", "HOME": "/home/ann"}, "/data/toolagent"),
        ({"HOME": "/home/ann"}, "/home/ann/.local/share/toolagent"),
        ({"XDG_DATA_HOME": "", "HOME": "/home/ann"}, "/home/ann/.local/share/toolagent"),
        # XDG: a relative XDG_DATA_HOME is invalid and ignored.
        ({"XDG_DATA_HOME": "rel/data", "HOME": "/home/ann"}, "/home/ann/.local/share/toolagent"),
    ],
)
def test_the_user_data_dir_follows_xdg(environ: dict[str, str], expected: str) -> None:
    assert user_data_dir(environ) == Path(expected)
