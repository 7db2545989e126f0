"""Test factories: agent definitions with overrides."""

from __future__ import annotations

import copy
from typing import Any

BASE_DEFINITION: dict[str, Any] = {
    "metadata": {"name": "probe", "displayName": "Probe", "version": "1.0.0", "type": "tool"},
    "configuration": {
        "tools": ["demo/echo", "demo/add"],
        "toolParams": {"demo/echo": {"text": "{{payload.text}}"}},
    },
}


def make_definition(**config_overrides: Any) -> dict[str, Any]:
    """A valid definition dict; keyword arguments replace keys of `configuration`."""
    data = copy.deepcopy(BASE_DEFINITION)
    data["configuration"].update(config_overrides)
    return data
