"""`evolve` returns what `dataclasses.replace` returns, for the records it copies and for any other
dataclass (through `replace` itself)."""

from __future__ import annotations

import dataclasses
from dataclasses import InitVar, dataclass, field
from datetime import UTC, datetime

import pytest

from toolagent._evolve import evolve
from toolagent.model.execution import Execution
from toolagent.model.status import CallStatus, ExecutionStatus
from toolagent.tools.base import CallOutcome


def _execution() -> Execution:
    return Execution(
        id="exec_1_ab",
        tool="probe/echo",
        category="memory",
        risk="safe",
        status=ExecutionStatus.RUNNING,
        user="ann",
        started_at=datetime(2026, 1, 2, tzinfo=UTC),
        metadata={"k": "v"},
        arguments={"a": 1},
    )


@pytest.mark.parametrize("record", [_execution(), CallOutcome(CallStatus.OK, "probe/echo", "exec_1_ab")])
def test_a_copy_with_changes_equals_replace(record: object) -> None:
    changes = {"error": "boom", "duration_ms": 1.5}
    copied = evolve(record, **changes)
    assert copied == dataclasses.replace(record, **changes)  # type: ignore[type-var]
    assert copied is not record and type(copied) is type(record)
    assert {f.name: getattr(copied, f.name) for f in dataclasses.fields(copied)} == {
        f.name: getattr(dataclasses.replace(record, **changes), f.name) for f in dataclasses.fields(copied)
    }  # type: ignore[type-var]
    assert record.error is None  # type: ignore[attr-defined]  # the original is untouched
    with pytest.raises(dataclasses.FrozenInstanceError):
        copied.error = "again"  # type: ignore[misc]


def test_a_field_named_record_can_change() -> None:
    outcome = CallOutcome(CallStatus.OK, "probe/echo")
    assert evolve(outcome, record=_execution()).record == _execution()


def test_an_unknown_field_is_refused() -> None:
    with pytest.raises(TypeError, match="colour"):
        evolve(_execution(), colour="red")


@dataclass(frozen=True)
class _Checked:
    n: int
    doubled: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "doubled", self.n * 2)


@dataclass
class _WithInitVar:
    n: int
    scale: InitVar[int]


@dataclass(frozen=True, slots=True)
class _Slotted:
    n: int


def test_other_dataclasses_go_through_replace() -> None:
    assert evolve(_Checked(1), n=3).doubled == 6  # __post_init__ ran
    with pytest.raises(ValueError, match="scale"):
        evolve(_WithInitVar(1, 2), n=2)  # replace's own rule: an InitVar must be given again
    assert evolve(_Slotted(1), n=2) == _Slotted(2)
