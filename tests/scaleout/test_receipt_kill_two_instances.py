"""Two instances of the app on one stack; the one the test arms holds each receipt right
after the mail service carried its send out, before the receipt's record or the session state
says so, and is killed there with SIGKILL. Once the killed instance's session locks run out,
the other instance (or the killed one, started again) runs those tasks again: every order is
charged once and mailed once, the receipts cut short included."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.domain.receipt_emails import SENDING, SENT
from tests.e2e.conftest import wait_for

from .receipt_kills import AFTER_A_KILL, kill_stack

pytestmark = pytest.mark.e2e


def test_an_instance_killed_between_the_send_and_the_state_write_mails_each_receipt_once(
    tmp_path: Path,
) -> None:
    with kill_stack(tmp_path, instances=2, api_only_here=False) as stack:
        (second,) = stack.e2e.stack.more_instances
        killed = second.pid
        stack.arm(second)

        # Given: orders spread over both instances, until the armed one holds a sent receipt
        jobs = stack.submit_until_held(8)

        # When: it is killed there
        second.kill()
        held = stack.held()
        assert held and {h.pid for h in held} == {killed}
        for receipt in held:
            assert len(stack.e2e.receipt_mails(receipt.job_id)) == 1  # it went out
            record = stack.receipt_record(receipt.job_id)
            assert record is not None and record.status == SENDING  # nothing recorded it

        # Then: every order completes, charged once and mailed once
        for job in jobs:
            stack.completed_and_mailed_once(job)
        for receipt in held:
            record = stack.receipt_record(receipt.job_id)
            assert record is not None and (record.status, record.attempts) == (SENT, 2)
        wait_for(
            lambda: second.starts == 2 and second.running(),
            timeout=AFTER_A_KILL,
            what="the killed instance started again",
        )
