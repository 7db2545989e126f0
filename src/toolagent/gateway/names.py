"""Tool names as MCP clients see them: `namespace/tool` mapped to `namespace__tool`.

Many clients accept only `[A-Za-z0-9_-]` in a tool name and prefix it with their own name for the
server, within 64 characters in all. So the gateway's name is the qualified name with `/` spelled
`__` and every other character outside that set spelled `_`; a name longer than `MAX_NAME_CHARS`
keeps its first 55 characters and ends in `_` and 8 hex digits of the SHA-256 of the qualified
name. The mapping is a table built over the whole catalogue, so it is reversed by lookup, never by
parsing; two tools that would get one name are an error naming both.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..errors import ConfigError
from ..model.spec import NAMESPACE_SEPARATOR

#: Longest name the gateway gives a tool.
MAX_NAME_CHARS = 64
#: Characters kept of a name too long, before `_` and the hash digits.
KEPT_CHARS = 55
#: Hex digits of the qualified name's SHA-256 ending a shortened name.
HASH_DIGITS = 8
#: What stands for the namespace separator.
SEPARATOR = "__"

_INVALID = re.compile(r"[^A-Za-z0-9_-]")


def gateway_name(qualified: str) -> str:
    """The name the gateway gives the tool `namespace/tool` (see the module docstring)."""
    ns, _, tool = qualified.partition(NAMESPACE_SEPARATOR)
    name = _INVALID.sub("_", ns) + SEPARATOR + _INVALID.sub("_", tool)
    if len(name) <= MAX_NAME_CHARS:
        return name
    digest = hashlib.sha256(qualified.encode()).hexdigest()[:HASH_DIGITS]
    return f"{name[:KEPT_CHARS]}_{digest}"


class NameCollision(ConfigError):
    """Two tools would have one gateway name."""


@dataclass(frozen=True)
class NameMap:
    """Gateway name <-> qualified name, both ways, for one catalogue."""

    to_gateway: dict[str, str] = field(default_factory=dict)
    """Qualified name -> gateway name."""
    to_qualified: dict[str, str] = field(default_factory=dict)
    """Gateway name -> qualified name."""

    @classmethod
    def build(cls, qualified_names: Iterable[str]) -> NameMap:
        """The mapping of `qualified_names`.

        Raises:
            NameCollision: two of them get one gateway name (the message names both).
        """
        forward: dict[str, str] = {}
        backward: dict[str, str] = {}
        for qualified in sorted(set(qualified_names)):
            name = gateway_name(qualified)
            other = backward.get(name)
            if other is not None:
                raise NameCollision(
                    f"tools '{other}' and '{qualified}' would both be '{name}' on the MCP gateway: "
                    "rename one server in mcp.json, or disable one of the tools in the engine config"
                )
            forward[qualified] = name
            backward[name] = qualified
        return cls(forward, backward)

    def qualified(self, name: str) -> str | None:
        """The qualified name of the gateway name `name`, if it names a tool."""
        return self.to_qualified.get(name)

    def __len__(self) -> int:
        return len(self.to_gateway)


__all__ = ["HASH_DIGITS", "KEPT_CHARS", "MAX_NAME_CHARS", "SEPARATOR", "NameCollision", "NameMap", "gateway_name"]
