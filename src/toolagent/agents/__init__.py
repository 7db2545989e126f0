"""Agent definitions: the contract, its validation and its loaders.

Names load on first use (as in `toolagent.engine`): the store needs only the records
(`models`), not the loaders, the validation and the interpolation's template engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .loaders import DEFAULT_ORG, LoadedAgent, load_path, load_record, record_from_definition
    from .models import AgentDef, AgentRecord, Configuration, DeliverableFormat, ExecutionMode, definition_json_schema
    from .validation import load_definition_text, parse_document, validate_definition

#: Public name -> submodule.
_EXPORTS = {
    "DEFAULT_ORG": "loaders",
    "LoadedAgent": "loaders",
    "load_path": "loaders",
    "load_record": "loaders",
    "record_from_definition": "loaders",
    "AgentDef": "models",
    "AgentRecord": "models",
    "Configuration": "models",
    "DeliverableFormat": "models",
    "ExecutionMode": "models",
    "definition_json_schema": "models",
    "load_definition_text": "validation",
    "parse_document": "validation",
    "validate_definition": "validation",
}

__getattr__ = lazy_exports(__name__, _EXPORTS, globals())


__all__ = [
    "DEFAULT_ORG",
    "AgentDef",
    "AgentRecord",
    "Configuration",
    "DeliverableFormat",
    "ExecutionMode",
    "LoadedAgent",
    "definition_json_schema",
    "load_definition_text",
    "load_path",
    "load_record",
    "parse_document",
    "record_from_definition",
    "validate_definition",
]
