"""One instance of the app runs the triggers (the stack's first runs only the API); armed, it
holds each receipt right after the mail service carried its send out, before the receipt's
record or the session state says so, and is killed there with SIGKILL, then started again as
the platform restarts a host whose process ended. The restarted instance runs those tasks
again once the session locks run out: every order is charged once and mailed once."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.domain.receipt_emails import SENDING, SENT
from tests.e2e.conftest import wait_for

from .receipt_kills import AFTER_A_KILL, kill_stack

pytestmark = pytest.mark.e2e


def test_the_only_instance_killed_after_the_send_and_restarted_mails_each_receipt_once(
    tmp_path: Path,
) -> None:
    with kill_stack(tmp_path, instances=2, api_only_here=True) as stack:
        (only,) = stack.e2e.stack.more_instances
        killed = only.pid
        stack.arm(only)

        # Given: orders, until the instance holds a sent receipt
        jobs = stack.submit_until_held(4)

        # When: it is killed there, and started again
        only.kill()
        held = stack.held()
        assert held and {h.pid for h in held} == {killed}
        for receipt in held:
            assert len(stack.e2e.receipt_mails(receipt.job_id)) == 1  # it went out
            record = stack.receipt_record(receipt.job_id)
            assert record is not None and record.status == SENDING  # nothing recorded it
        wait_for(
            lambda: only.starts == 2 and only.running(),
            timeout=AFTER_A_KILL,
            what="the instance started again",
        )

        # Then: every order completes, charged once and mailed once
        for job in jobs:
            stack.completed_and_mailed_once(job)
        for receipt in held:
            record = stack.receipt_record(receipt.job_id)
            assert record is not None and (record.status, record.attempts) == (SENT, 2)
