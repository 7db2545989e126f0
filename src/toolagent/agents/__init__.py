"""Agent definitions: the contract, its validation and its loaders."""

from .loaders import DEFAULT_ORG, LoadedAgent, load_path, load_record, record_from_definition
from .models import (
    AgentDef,
    AgentRecord,
    Configuration,
    DeliverableFormat,
    ExecutionMode,
    definition_json_schema,
)
from .validation import load_definition_text, parse_document, validate_definition

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
