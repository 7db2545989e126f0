"""`safe_load`: YAML parsing with bounded alias expansion.

PyYAML's `safe_load` builds an alias as a shared reference, so a 600-byte "billion laughs"
document loads quickly into a small graph, but every later walk over it (validation, JSON
serialisation, template parsing, storing it) expands it in full: millions of nodes at depth 6.
This loader composes the node graph first, measures it as it would be once expanded (shared
nodes counted every time they are reached), and refuses it before anything is constructed
when it is too big, too deep, uses too many aliases or refers to itself.
"""

from __future__ import annotations

from typing import Any

import yaml

#: Most nodes a document may hold once its aliases are expanded.
MAX_YAML_NODES = 100_000
#: Deepest nesting of collections, counting through aliases.
MAX_YAML_DEPTH = 64
#: Most times a document may reuse an anchored node through an alias.
MAX_YAML_ALIASES = 1_000

# libyaml's parser, where PyYAML was built with it, composes the node graph in C (about ten times
# faster); the bounds below are checked on that graph either way.
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YamlTooLarge(yaml.YAMLError):
    """A YAML document that would expand past the loader's bounds (an alias bomb)."""


def _expanded_size(root: yaml.Node, *, max_nodes: int, max_depth: int, max_aliases: int) -> int:
    # Memo per node: (expanded size, height below it), so a reused node is measured once but
    # counted, and checked for depth, every time it is reached.
    measured: dict[int, tuple[int, int]] = {}
    open_nodes: set[int] = set()
    aliases = 0

    def too_deep() -> YamlTooLarge:
        return YamlTooLarge(f"YAML document is nested more than {max_depth} levels deep (counting through aliases)")

    def measure(node: yaml.Node, depth: int) -> tuple[int, int]:
        nonlocal aliases
        key = id(node)
        if key in open_nodes:
            raise YamlTooLarge(
                "YAML alias refers to a node that contains it (a recursive document); write the value out"
            )
        if key in measured:
            aliases += 1
            if aliases > max_aliases:
                raise YamlTooLarge(f"YAML document reuses anchors more than {max_aliases} times; write the values out")
            size, height = measured[key]
            if depth + height > max_depth:
                raise too_deep()
            return size, height
        if depth > max_depth:
            raise too_deep()
        total, height = 1, 0
        if isinstance(node, (yaml.SequenceNode, yaml.MappingNode)):
            open_nodes.add(key)
            children: list[yaml.Node] = (
                list(node.value) if isinstance(node, yaml.SequenceNode) else [n for pair in node.value for n in pair]
            )
            for child in children:
                size, child_height = measure(child, depth + 1)
                total += size
                height = max(height, child_height + 1)
                if total > max_nodes:
                    raise YamlTooLarge(
                        f"YAML document expands to more than {max_nodes} nodes once its aliases (*name) are "
                        "resolved; remove the repeated aliases"
                    )
            open_nodes.discard(key)
        measured[key] = (total, height)
        return total, height

    return measure(root, 0)[0]


def safe_load(
    text: str,
    *,
    max_nodes: int = MAX_YAML_NODES,
    max_depth: int = MAX_YAML_DEPTH,
    max_aliases: int = MAX_YAML_ALIASES,
) -> Any:
    """Parse one YAML document like `yaml.safe_load`, refusing alias bombs before building them.

    Raises:
        YamlTooLarge: the document expands past `max_nodes`, nests past `max_depth`, reuses
            anchors more than `max_aliases` times, or contains itself.
        yaml.YAMLError: the text is not valid YAML.
    """
    loader = _Loader(text)
    try:
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _expanded_size(node, max_nodes=max_nodes, max_depth=max_depth, max_aliases=max_aliases)
        except RecursionError as exc:
            raise YamlTooLarge(f"YAML document is nested more than {max_depth} levels deep") from exc
        return loader.construct_document(node)
    finally:
        loader.dispose()
