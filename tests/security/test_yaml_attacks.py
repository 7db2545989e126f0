"""Every YAML loader refuses alias bombs before expanding them, and the API stores none."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolagent.agents import load_path
from toolagent.agents.validation import parse_document
from toolagent.agents.yaml_loader import YamlTooLarge, safe_load
from toolagent.engine.config import EngineConfig
from toolagent.errors import ConfigError, DefinitionInvalid

from .yaml_attacks import YAML_ALLOWED, YAML_BOMBS, laughs

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(("name", "document", "needle"), YAML_BOMBS, ids=[b[0] for b in YAML_BOMBS])
def test_safe_load_refuses(name: str, document: str, needle: str) -> None:
    with pytest.raises(YamlTooLarge, match=needle):
        safe_load(document)


@pytest.mark.parametrize(("name", "document", "needle"), YAML_BOMBS, ids=[b[0] for b in YAML_BOMBS])
def test_definition_parser_refuses_with_a_clear_problem(name: str, document: str, needle: str) -> None:
    with pytest.raises(DefinitionInvalid) as info:
        parse_document(document, source="bomb.yaml")
    assert needle in str(info.value) and "YAML refused" in str(info.value)


@pytest.mark.parametrize(("name", "document"), YAML_ALLOWED, ids=[a[0] for a in YAML_ALLOWED])
def test_ordinary_anchors_still_load(name: str, document: str) -> None:
    import yaml

    assert safe_load(document) == yaml.safe_load(document)


def test_agent_file_with_a_bomb_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(laughs(6), encoding="utf-8")
    with pytest.raises(DefinitionInvalid, match="expands to more than"):
        load_path(path)


def test_engine_config_with_a_bomb_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "engine.yaml"
    path.write_text(
        "a: &a [x, x, x, x, x, x, x, x, x]\n"
        + "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}' if i > 1 else '*a'] * 9)}]\n" for i in range(1, 8)),
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match="expands to more than"):
        EngineConfig.load(path)
