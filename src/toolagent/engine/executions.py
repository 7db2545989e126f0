"""Execution ids and timeouts; the records live in `model/execution.py`, their store verbs
in `store/executions.py`."""

from __future__ import annotations

import secrets

from ..errors import UsageError
from ..model.execution import MAX_TIMEOUT_MS, MIN_TIMEOUT_MS


def new_execution_id(now_s: float) -> str:
    """`exec_{milliseconds since the epoch}_{8 random hex digits}`."""
    return f"exec_{int(now_s * 1000)}_{secrets.token_hex(4)}"


def check_timeout_ms(value: int) -> int:
    """A requested timeout, checked against 1000..300000 ms.

    Raises:
        UsageError: (BAD_REQUEST) outside the range.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_TIMEOUT_MS <= value <= MAX_TIMEOUT_MS:
        raise UsageError(f"timeout must be between {MIN_TIMEOUT_MS} and {MAX_TIMEOUT_MS} ms (got {value!r})")
    return value


def resolve_timeout_ms(requested: int | None, tool_timeout_s: float | None, default_ms: int) -> int:
    """The call's timeout: the requested one (checked), else the server config's for the tool
    (brought into range), else the engine default."""
    if requested is not None:
        return check_timeout_ms(requested)
    if tool_timeout_s is not None:
        return min(MAX_TIMEOUT_MS, max(MIN_TIMEOUT_MS, round(tool_timeout_s * 1000)))
    return default_ms


__all__ = ["check_timeout_ms", "new_execution_id", "resolve_timeout_ms"]
