"""An agent as shown to someone who may not edit it: every secret in it masked.

A definition should name its secrets, not hold them (a parameter rendered from the environment or
the payload), but one written with a key or a password in it is still readable by every key that
may read agents. Those who may edit the agent (`engine.ownership.may_edit_agents`) see it as
stored, because they need the real text to change it; everyone else sees the record and its
definition through `model.redaction`: values under secret-naming keys and secret-shaped strings
become `[REDACTED]`. The YAML text is parsed, masked and written out again when anything in it is
masked (its comments go with it, since they may hold secrets too); otherwise it is kept as written.
"""

from __future__ import annotations

from typing import Any

import yaml

from ..agents.models import AgentRecord
from ..agents.validation import parse_document
from ..model.redaction import redact, redact_text


def masked_yaml(text: str) -> str:
    """The definition text with its secrets masked (the text itself when it holds none)."""
    try:
        document = parse_document(text)
    except Exception:  # noqa: BLE001 - a stored row that no longer parses is masked as text
        return redact_text(text)
    masked = redact(document)
    if masked == document and redact_text(text) == text:
        return text
    return yaml.safe_dump(masked, sort_keys=False, width=100, allow_unicode=True)


def masked_record_json(record: AgentRecord) -> dict[str, Any]:
    """The record as JSON data, its definition text and free-form fields masked."""
    data = record.model_dump(mode="json")
    masked: dict[str, Any] = redact({k: v for k, v in data.items() if k != "yaml"})
    masked["yaml"] = masked_yaml(record.yaml)
    return masked


def masked_definition(definition: dict[str, Any]) -> dict[str, Any]:
    """A normalized definition (JSON data) with its secrets masked."""
    return redact(definition)  # type: ignore[no-any-return]


__all__ = ["masked_definition", "masked_record_json", "masked_yaml"]
