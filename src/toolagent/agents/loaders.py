"""Loaders: agent YAML files, seed JSON records and database rows all become a `LoadedAgent`.

Nothing downstream knows where a definition came from; `source` only labels error messages.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import DefinitionInvalid, Problem
from .models import AgentDef, AgentRecord
from .validation import load_definition_text, parse_document, validate_definition

#: Organization given to agent YAML files that are stored without an explicit one.
DEFAULT_ORG = "demo"
#: Mode profile given to records built from a bare definition.
DEFAULT_MODE_PROFILE = "tool_full"


@dataclass(frozen=True)
class LoadedAgent:
    """A validated definition with its record, wherever it came from.

    Attributes:
        definition: the validated configuration contract.
        record: the `agents` row (built from the definition for YAML files).
        source: file path or `org/slug` of the row, for messages.
    """

    definition: AgentDef
    record: AgentRecord
    source: str

    @property
    def ref(self) -> str:
        """`org/slug`."""
        return self.record.ref


def record_from_definition(defn: AgentDef, text: str, *, org: str = DEFAULT_ORG) -> AgentRecord:
    """The `agents` row that stores a bare definition file."""
    md = defn.metadata
    return AgentRecord(
        organization_slug=org,
        slug=md.name,
        display_name=md.displayName or md.name,
        agent_type=md.type,
        mode_profile=DEFAULT_MODE_PROFILE,
        status="active",
        yaml=text,
        description=md.description,
        version=md.version,
        context=json.dumps(defn.context) if defn.context is not None else None,
    )


def load_record(record: AgentRecord, *, source: str | None = None) -> LoadedAgent:
    """Validate the definition held in a record's `yaml` column."""
    src = source or record.ref
    definition = load_definition_text(record.yaml, source=f"{src}: yaml")
    return LoadedAgent(definition=definition, record=record, source=src)


def _record_from_mapping(data: Mapping[str, Any], *, source: str) -> AgentRecord:
    try:
        return AgentRecord.model_validate(dict(data))
    except ValidationError as exc:
        problems = []
        for e in exc.errors():
            path = ".".join(str(p) for p in e["loc"])
            msg = (
                "required field is missing"
                if e["type"] == "missing"
                else (f"unknown field '{e['loc'][-1]}'" if e["type"] == "extra_forbidden" else e["msg"])
            )
            problems.append(Problem(path, msg))
        raise DefinitionInvalid(problems, source=source) from exc


def _is_record(data: Any) -> bool:
    return isinstance(data, Mapping) and "yaml" in data and "organization_slug" in data


def load_path(path: str | Path, *, org: str = DEFAULT_ORG) -> list[LoadedAgent]:
    """Load every agent in a file: a definition (YAML/JSON), a seed record, or a list of records.

    Raises:
        DefinitionInvalid: with the file name and field path of every problem.
        NotFound-style OSError is translated to DefinitionInvalid naming the file.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise DefinitionInvalid([Problem("", f"cannot read file: {exc.strerror or exc}")], source=str(p)) from exc
    except UnicodeDecodeError as exc:
        raise DefinitionInvalid(
            [Problem("", f"is not UTF-8 text (byte {exc.start}): save it as UTF-8")], source=str(p)
        ) from exc
    data = parse_document(text, source=str(p))
    if isinstance(data, list):
        problems: list[Problem] = []
        loaded: list[LoadedAgent] = []
        for i, item in enumerate(data):
            try:
                if not _is_record(item):
                    raise DefinitionInvalid(
                        [Problem("", "expected an agent record with organization_slug, slug and yaml")]
                    )
                loaded.append(load_record(_record_from_mapping(item, source=f"{p}[{i}]"), source=f"{p}[{i}]"))
            except DefinitionInvalid as exc:
                problems.extend(Problem(f"[{i}]" + (f".{q.path}" if q.path else ""), q.message) for q in exc.problems)
        if problems:
            raise DefinitionInvalid(problems, source=str(p))
        return loaded
    if _is_record(data):
        record = _record_from_mapping(data, source=str(p))
        return [load_record(record, source=str(p))]
    definition = validate_definition(data, source=str(p))
    return [LoadedAgent(definition=definition, record=record_from_definition(definition, text, org=org), source=str(p))]
