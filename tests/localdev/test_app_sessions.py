"""The real app (function_app.py) on the local host, with one session slot per queue and a
sessionIdleTimeout of a minute: the app releases each session when its last message is settled,
so the slot takes the next session at once instead of waiting out the idle timeout for a message
that will never come. And a transient failure is waited out in its invocation, holding the
session, then given up on once its retry window has passed: TASK_ATTEMPTS attempts, counted by
the app itself, whatever delivery counts the trigger hands over."""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterator

import pytest

from shared.domain.pipelines import purchase_messages
from tests.polling import wait_for

from .conftest import APP_IMPORT_QUEUE, APP_PURCHASE_QUEUE
from .real_app import (
    IDLE_TIMEOUT_SECONDS,
    OUTAGE_CARD,
    TASK_ATTEMPTS,
    App,
    dead_letters,
    import_session,
    order,
    run_app,
)

pytestmark = pytest.mark.integration

# Well inside the idle timeout: a session that is not released holds the only slot for a
# minute, so the next one cannot finish within this.
WITHIN = IDLE_TIMEOUT_SECONDS / 2


@pytest.fixture
def app(servicebus_connection_string: str, azurite_connection_string: str) -> Iterator[App]:
    with run_app(servicebus_connection_string, azurite_connection_string) as running:
        yield running


def test_one_session_slot_runs_session_after_session_without_waiting_the_idle_timeout(
    app: App,
) -> None:
    run = uuid.uuid4().hex[:8]
    imports = {f"import-{run}-{n}": [f"APP-{run}-{n}-{row}" for row in (1, 2)] for n in (1, 2, 3)}
    for session_id, skus in imports.items():
        app.send(APP_IMPORT_QUEUE, session_id, import_session(session_id, skus))

    every_sku = [sku for skus in imports.values() for sku in skus]
    wait_for(
        lambda: all(app.imported(sku) for sku in every_sku),
        timeout=WITHIN,
        what="three import sessions through one slot",
    )

    jobs = [f"order-{run}-{n}" for n in (1, 2)]
    for job in jobs:
        app.send(APP_PURCHASE_QUEUE, job, purchase_messages(job, order(every_sku[0])))
    wait_for(
        lambda: all(app.receipt(job) for job in jobs),
        timeout=WITHIN,
        what="two purchase sessions through one slot",
    )


def test_a_transient_failure_fails_the_session_after_the_apps_own_attempts(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    run = uuid.uuid4().hex[:8]
    sku = f"APP-{run}-tea"
    app.send(APP_IMPORT_QUEUE, f"import-{run}", import_session(f"import-{run}", [sku]))
    wait_for(lambda: app.imported(sku), timeout=WITHIN, what="the product imported")
    job = f"order-{run}"
    caplog.set_level(logging.INFO, logger="functions_local_host")

    app.send(APP_PURCHASE_QUEUE, job, purchase_messages(job, order(sku, card=OUTAGE_CARD)))

    letters = wait_for(
        lambda: len(found := dead_letters(app, job)) == 3 and found,
        timeout=WITHIN,
        what="the payment and the two tasks after it dead-lettered",
    )
    assert [(m.message_id, m.dead_letter_reason) for m in letters] == [
        (f"{job}:3", "PaymentProviderUnavailable"),
        (f"{job}:4", "SessionFailed"),
        (f"{job}:5", "SessionFailed"),
    ]
    description = str(letters[0].dead_letter_error_description)
    assert description.startswith("Gave up: the payment provider was out of reach for ")
    assert f"({TASK_ATTEMPTS} attempts;" in description
    assert "failed at step 3 (ProcessPayment) with PaymentProviderUnavailable" in str(
        letters[1].dead_letter_error_description
    )
    # every attempt in one invocation: no delivery spent on a retry
    payment_runs = re.findall(rf"MessageId: {re.escape(job)}:3,", caplog.text)
    assert len(payment_runs) == 1
    assert not app.receipt(job)
