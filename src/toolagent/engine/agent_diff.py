"""The compact diff of an agent change that its audit row carries.

A record is seen as its fields plus its parsed definition under `yaml` (so a change reads
`yaml.configuration.toolParams.supabase/execute-sql.sql`, the same path a 400 names). Mappings
are walked key by key; lists and scalars are compared whole. The diff is a list of
`{"path": ..., "old": ..., "new": ...}`, a side left out when the path is absent there (a list,
not a mapping keyed by path, so a path that names a secret does not get the whole entry masked
when the audit row is redacted again). Values come from redacted copies of both sides
(`model.redaction`), so a secret is never written, and a changed secret still shows as a
changed path; each value is cut to `MAX_VALUE_CHARS` of JSON and at most `MAX_PATHS` paths are
listed (a last `{"path": "…", "more": N}` counts the rest).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from ..agents.models import AgentRecord
from ..agents.validation import parse_document
from ..model.redaction import redact

#: Paths listed per change; the rest are counted under `"…"`.
MAX_PATHS: Final = 40
#: JSON characters kept of each old or new value.
MAX_VALUE_CHARS: Final = 300
#: Record fields that are not part of the definition (the key, and what the store sets).
_SKIPPED: Final = frozenset({"organization_slug", "slug", "created_at", "updated_at"})
_ABSENT: Final = object()


def record_view(record: AgentRecord) -> dict[str, Any]:
    """A record as compared: its fields that are set, with `yaml` parsed (kept as text if it does not parse)."""
    # Empty optional fields are left out, so a new agent's diff lists only what it sets.
    view: dict[str, Any] = {
        k: v for k, v in record.model_dump(mode="json").items() if k not in _SKIPPED and v is not None
    }
    try:
        view["yaml"] = parse_document(record.yaml)
    except Exception:  # noqa: BLE001 - an invalid stored row is compared as its text
        view["yaml"] = record.yaml
    return view


def _changed_paths(old: Any, new: Any, prefix: tuple[str, ...], out: list[tuple[str, ...]]) -> None:
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for key in sorted({*old, *new}, key=str):
            _changed_paths(old.get(key, _ABSENT), new.get(key, _ABSENT), (*prefix, str(key)), out)
    elif old is _ABSENT and isinstance(new, Mapping) and new:
        for key in sorted(new, key=str):
            _changed_paths(_ABSENT, new[key], (*prefix, str(key)), out)
    elif new is _ABSENT and isinstance(old, Mapping) and old:
        for key in sorted(old, key=str):
            _changed_paths(old[key], _ABSENT, (*prefix, str(key)), out)
    elif old != new or type(old) is not type(new):
        out.append(prefix)


def _at(tree: Any, path: tuple[str, ...]) -> Any:
    """The value at `path`; a redacted value replaced whole stands for everything under it."""
    for key in path:
        if not isinstance(tree, Mapping):
            return tree
        if key not in tree:
            return _ABSENT
        tree = tree[key]
    return tree


def _compact(value: Any) -> Any:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return value if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS] + "…"


def agent_diff(old: AgentRecord | None, new: AgentRecord | None) -> list[dict[str, Any]]:
    """The changed paths from `old` to `new` (None: the agent is absent on that side), redacted."""
    before = record_view(old) if old is not None else _ABSENT
    after = record_view(new) if new is not None else _ABSENT
    paths: list[tuple[str, ...]] = []
    _changed_paths(before, after, (), paths)
    safe_before = redact(before) if before is not _ABSENT else _ABSENT
    safe_after = redact(after) if after is not _ABSENT else _ABSENT
    diff: list[dict[str, Any]] = []
    for path in paths[:MAX_PATHS]:
        entry: dict[str, Any] = {"path": ".".join(path)}
        for side, tree in (("old", safe_before), ("new", safe_after)):
            value = _at(tree, path) if tree is not _ABSENT else _ABSENT
            if value is not _ABSENT:
                entry[side] = _compact(value)
        diff.append(entry)
    if len(paths) > MAX_PATHS:
        diff.append({"path": "…", "more": len(paths) - MAX_PATHS})
    return diff


__all__ = ["MAX_PATHS", "MAX_VALUE_CHARS", "agent_diff", "record_view"]
