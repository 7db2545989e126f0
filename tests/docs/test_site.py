"""The manual builds strictly, offline, with references generated from the code and a changelog
whose latest release is the package's version."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import gen_docs  # noqa: E402

import toolagent  # noqa: E402


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stderr[-3000:]}"
    return out


def test_the_site_builds_strictly_with_every_page(site: Path) -> None:
    pages = {p.relative_to(REPO / "docs").with_suffix("") for p in (REPO / "docs").rglob("*.md")}
    for page in pages:
        if "_incoming" in page.parts:
            assert not (site / page.parent / page.name).exists(), f"draft {page} was published"
            continue
        index = site / (page.parent if page.name == "index" else page) / "index.html"
        assert index.is_file(), f"docs/{page}.md was not built"


def test_the_site_loads_nothing_from_another_host(site: Path) -> None:
    external = re.compile(r"""<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)=["']?(?:https?:)?//""", re.I)
    for html in site.rglob("*.html"):
        found = external.findall(html.read_text(encoding="utf-8"))
        assert not found, f"{html.relative_to(site)} loads {found[:3]}"
    for css in site.rglob("*.css"):
        assert not re.search(r"@import\s+url\(\s*['\"]?https?://|fonts\.googleapis", css.read_text(encoding="utf-8"))


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    # The strict build must catch what it is there for; a copy of the docs with one bad link.
    docs = tmp_path / "docs"
    subprocess.run(["cp", "-r", str(REPO / "docs"), str(docs)], check=True)
    (tmp_path / "CHANGELOG.md").write_text((REPO / "CHANGELOG.md").read_text(encoding="utf-8"))
    (tmp_path / "mkdocs.yml").write_text((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    page = docs / "agents.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nSee [nowhere](no-such-page.md).\n")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode != 0 and "no-such-page.md" in proc.stderr


def test_the_generated_references_match_the_code() -> None:
    stale = gen_docs.stale_pages(write=False)
    assert not stale, f"{', '.join(stale)} differ from the code: run scripts/gen-docs"


def test_every_setting_is_in_the_variable_table() -> None:
    from toolagent.servers.supabase.settings import SupabaseSettings
    from toolagent.settings import Settings

    text = (REPO / "docs" / "operations" / "configuration.md").read_text(encoding="utf-8")
    for var in [*Settings.env_names(), *SupabaseSettings.env_names()]:
        assert text.count(f"| `{var}` |") == 1, var


def test_every_command_is_in_the_cli_reference() -> None:
    from toolagent.cli._app import COMMANDS

    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    for name in COMMANDS:
        assert f"## `toolagent {name}`" in text, name


def test_the_changelog_latest_release_is_the_package_version() -> None:
    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+[^\]]*)\] - \d{4}-\d{2}-\d{2}$", text, re.M)
    assert releases, "CHANGELOG.md has no released version (## [X.Y.Z] - YYYY-MM-DD)"
    assert "## [Unreleased]" in text.split(f"## [{releases[0]}]")[0], "Unreleased comes first"
    project = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    assert project is not None
    assert releases[0] == project[1] == toolagent.__version__, (releases[0], project[1], toolagent.__version__)


def test_every_page_starts_with_what_the_reader_can_do_after_it() -> None:
    for page in (REPO / "docs").rglob("*.md"):
        if "_incoming" in page.parts or page.name in ("index.md", "changelog.md") and page.parent == REPO / "docs":
            continue
        paragraphs = page.read_text(encoding="utf-8").split("\n\n")
        assert paragraphs[0].startswith("# ") and re.match(r"After (reading )?this page you can", paragraphs[1]), page
