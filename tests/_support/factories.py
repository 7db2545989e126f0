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


#: Which permission level may run which risk (the matrix the policy decides by), for table tests.
LEVEL_MAY_RUN: dict[tuple[str, str], bool] = {
    ("view_only", "safe"): False,
    ("view_only", "moderate"): False,
    ("view_only", "dangerous"): False,
    ("execute_basic", "safe"): True,
    ("execute_basic", "moderate"): False,
    ("execute_basic", "dangerous"): False,
    ("execute_advanced", "safe"): True,
    ("execute_advanced", "moderate"): True,
    ("execute_advanced", "dangerous"): False,
    ("admin", "safe"): True,
    ("admin", "moderate"): True,
    ("admin", "dangerous"): True,
}
#: The levels a denial names as required, by risk.
REQUIRED_LEVELS: dict[str, str] = {
    "safe": "execute_basic, execute_advanced or admin",
    "moderate": "execute_advanced or admin",
    "dangerous": "admin",
}
