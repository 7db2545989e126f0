"""The one table that translates a call's ending into its execution record, audit row and step."""

from __future__ import annotations


def test_every_call_status_has_one_translation_into_each_record() -> None:
    from toolagent.model.status import (
        AUDIT_OUTCOME_OF,
        CALL_STATUS_AS,
        CALL_STATUS_OF,
        FINAL_EXECUTION_STATUSES,
        CallStatus,
        ExecutionStatus,
    )

    assert set(CALL_STATUS_AS) == set(CallStatus)
    assert set(AUDIT_OUTCOME_OF) == set(CALL_STATUS_OF) == FINAL_EXECUTION_STATUSES
    for call, (stored, audited, _) in CALL_STATUS_AS.items():
        assert stored in FINAL_EXECUTION_STATUSES
        # Read back from its record, a call ends as it was stored (a denial or timeout by its columns).
        if call in (CallStatus.OK, CallStatus.FAILED, CallStatus.CANCELLED):
            assert CALL_STATUS_OF[stored] is call and AUDIT_OUTCOME_OF[stored] is audited
    assert ExecutionStatus.QUEUED not in AUDIT_OUTCOME_OF
