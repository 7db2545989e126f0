"""Packages whose public names load on first use (PEP 562).

A package's `__init__` that imported every submodule made importing any one of them load them
all: `toolagent.store` needs the agent records, not the loaders and the template engine; the
`runs list` command needs the run flow cap, not the planner and the runner.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package` that imports `exports[name]` (a submodule, or a module
    relative to the package such as `..model.spec`) on first use of `name` and keeps the value in
    the package's `namespace` (its `globals()`)."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module if module.startswith(".") else "." + module, package), name)
        namespace[name] = value
        return value

    return __getattr__


__all__ = ["lazy_exports"]
