"""Shared fixtures: store URLs for SQLite and PostgreSQL, the repo root, the npm peers."""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from _support.repo import NODE_BIN, REPO_ROOT  # noqa: E402


def _pg_base_url() -> str | None:
    return os.environ.get("TOOLAGENT_TEST_PG_URL") or None


@pytest.fixture(scope="session")
def pg_base_url() -> str:
    """The URL of the test PostgreSQL server (scripts/test starts one); skips when absent."""
    url = _pg_base_url()
    if not url:
        pytest.skip("TOOLAGENT_TEST_PG_URL is not set (scripts/test starts a throwaway cluster)")
    return url


def _swap_database(url: str, name: str) -> str:
    base, _, _ = url.rpartition("/")
    return f"{base}/{name}"


@pytest.fixture()
def pg_url(pg_base_url: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test, dropped afterwards."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    plain = pg_base_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _swap_database(pg_base_url, name)
    finally:
        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store URL on each database the suite runs against."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"
    return request.getfixturevalue("pg_url")


@pytest.fixture(scope="session")
def node_bin() -> Path:
    """Folder of the npm-installed MCP servers (scripts/bootstrap --with-node installs them)."""
    if not (NODE_BIN / "mcp-server-everything").exists():
        pytest.skip("npm MCP servers not installed: run scripts/bootstrap --with-node")
    return NODE_BIN


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark what needs PostgreSQL or the npm servers, so `-m "not postgres"` / `-m "not node"`
    deselect exactly those: tests taking a PostgreSQL fixture or the `db_url[postgres]` case,
    and tests taking `node_bin`. The `slow` tests go first: with several pytest workers, a test of
    a minute started last would keep one worker busy alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: the rest keep their order
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        callspec = getattr(item, "callspec", None)
        params = callspec.params if callspec is not None else {}
        if names & {"pg_url", "pg_base_url"} or params.get("db_url") == "postgres":
            item.add_marker(pytest.mark.postgres)
        if "node_bin" in names:
            item.add_marker(pytest.mark.node)


@pytest.fixture(scope="session", autouse=True)
def _migrated_sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A new SQLite store opened in this process starts as a copy of one migrated once per test
    process: running the ten Alembic revisions costs about 150 ms a store, a copy about 20.
    Migrations add no per-store data, so the copy is the store a migration would make; tests of the
    migrations themselves drive `Database` directly, which this leaves alone."""
    from toolagent.store import Store, open_store

    template = tmp_path_factory.mktemp("template") / "store.db"

    async def migrate_once() -> None:
        async with open_store(f"sqlite+aiosqlite:///{template}"):
            pass

    anyio.run(migrate_once)
    original = Store.__init__

    def from_template(self: Store, url: str | None = None) -> None:
        original(self, url)
        path = self.db.url.split(":///", 1)[1] if self.db.is_sqlite else ""
        if path and path != ":memory:" and not Path(path).exists():
            shutil.copyfile(template, path)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Store, "__init__", from_template)
        yield


@pytest.fixture(scope="session", autouse=True)
def _session_user_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A data directory for what module- and session-scoped fixtures start (live API servers)
    before any test's own: none of them may reach the per-user store of whoever runs the suite."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("session-data-home")))
        yield


@pytest.fixture(autouse=True)
def _own_user_data_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets a data directory of its own (`XDG_DATA_HOME`, inherited by the CLI processes
    it starts), so no test reads or writes the per-user default store of whoever runs the suite,
    and tests running in parallel never share one."""
    data_home = tmp_path_factory.mktemp("data-home")
    monkeypatch.setenv("XDG_DATA_HOME", str(data_home))
    return data_home


@pytest.fixture
def anyio_backend() -> str:
    """Async tests run on asyncio (the MCP SDK and the drivers use it)."""
    return "asyncio"
