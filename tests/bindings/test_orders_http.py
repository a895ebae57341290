"""POST /api/orders, called with real azure.functions requests; the sender is an in-memory twin
(or one that fails like Service Bus does)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import azure.functions as func
import pytest

from shared.adapters.servicebus_sender import ServiceBusTaskSender
from shared.domain.envelope import TaskMessage
from shared.domain.errors import SendUnconfirmed, ServiceUnavailable, SessionTooLarge
from shared.domain.idempotency import IdempotencyRecord
from shared.domain.pipelines import PURCHASE_TASKS
from shared.entrypoints.orders_http import submit_order_http
from tests.builders import order_document
from tests.fakes import InMemoryIdempotencyRecords, InMemoryOrderProgress
from tests.outages import unreachable_service_bus

from .conftest import Twins

ORDER = order_document()


def _post(body: bytes | Any, headers: dict[str, str] | None = None) -> func.HttpResponse:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = func.HttpRequest(
        method="POST",
        url="http://localhost:7071/api/orders",
        headers={"Content-Type": "application/json", **(headers or {})},
        body=raw,
    )
    return submit_order_http(request)


def _json(response: func.HttpResponse) -> Any:
    return json.loads(response.get_body())


def _assert_problem(response: func.HttpResponse, status: int) -> dict[str, Any]:
    assert response.status_code == status
    assert response.headers["Content-Type"].startswith("application/problem+json")
    document: dict[str, Any] = _json(response)
    assert document["status"] == status
    assert document["title"] and document["detail"]
    return document


def test_an_order_is_accepted_and_its_five_tasks_enqueued_in_order_in_one_session(
    twins: Twins,
) -> None:
    response = _post(ORDER)

    assert response.status_code == 202
    document = _json(response)
    assert document["status"] == "accepted"
    assert document["tasks"] == list(PURCHASE_TASKS)
    assert response.headers["Location"].endswith(document["job_id"])
    [(queue, session_id, messages)] = twins.sender.sessions
    assert (queue, session_id) == ("purchase-tasks", document["session_id"])
    assert [(m.step, m.task) for m in messages] == list(enumerate(PURCHASE_TASKS, start=1))
    assert [m.is_last for m in messages] == [False] * 4 + [True]


def test_json_answers_and_problems_end_with_a_newline(twins: Twins) -> None:
    """So that ``curl`` output does not run into the shell's prompt."""
    assert _post(ORDER).get_body().endswith(b"}\n")
    assert _post(b"{not json").get_body().endswith(b"}\n")


def test_the_same_idempotency_key_gives_the_same_job_twice(twins: Twins) -> None:
    first = _json(_post(ORDER, {"Idempotency-Key": "order-42"}))
    second = _json(_post(ORDER, {"Idempotency-Key": "order-42"}))

    assert first["job_id"] == second["job_id"]
    assert second == first  # the stored first response
    assert len(twins.sender.sessions) == 1  # the repeat enqueued nothing


def test_a_body_that_is_not_json_is_a_400_that_says_to_send_json(twins: Twins) -> None:
    document = _assert_problem(_post(b"{not json"), 400)
    assert "JSON object" in document["detail"]
    assert twins.sender.sessions == []


def test_a_body_that_is_not_an_object_is_a_400(twins: Twins) -> None:
    _assert_problem(_post([ORDER]), 400)


@pytest.mark.parametrize(
    ("change", "field", "detail"),
    [
        ({"lines": []}, "lines", "lines must hold at least one line"),
        (
            {"lines": [{"sku": "SKU-1", "quantity": -1}]},
            "lines[0].quantity",
            "lines[0].quantity",
        ),
        ({"customer_email": None}, "customer_email", "customer_email is required"),
    ],
)
def test_an_invalid_order_is_a_400_naming_the_field_to_fix(
    twins: Twins, change: dict[str, Any], field: str, detail: str
) -> None:
    document = _assert_problem(_post({**ORDER, **change}), 400)

    assert document["errors"][0]["field"] == field
    assert document["detail"].startswith(detail)
    assert twins.sender.sessions == []


def test_a_missing_customer_email_is_named(twins: Twins) -> None:
    order = {k: v for k, v in ORDER.items() if k != "customer_email"}
    document = _assert_problem(_post(order), 400)
    assert document["errors"] == [
        {"field": "customer_email", "problem": document["errors"][0]["problem"]}
    ]


def test_a_body_over_256_kib_is_a_413(twins: Twins) -> None:
    big = {**ORDER, "note": "x" * (256 * 1024)}
    document = _assert_problem(_post(big), 413)
    assert "262144 bytes" in document["detail"]
    assert twins.sender.sessions == []


def test_an_unreachable_service_bus_is_a_503_with_retry_advice(twins: Twins) -> None:
    twins.container.override(task_sender=ServiceBusTaskSender(unreachable_service_bus()))

    response = _post(ORDER, {"Idempotency-Key": "order-7"})

    document = _assert_problem(response, 503)
    assert response.headers["Retry-After"] == "30"
    assert "Retry" in document["detail"] and "Idempotency-Key" in document["detail"]
    assert "Traceback" not in response.get_body().decode()


class TooSmallBatch:
    def send_session(
        self, queue_name: str, session_id: str, messages: Sequence[TaskMessage]
    ) -> None:
        raise SessionTooLarge(f"Session {session_id} does not fit in one batch.")


def test_an_order_whose_tasks_do_not_fit_in_one_batch_is_a_413(twins: Twins) -> None:
    twins.container.override(task_sender=TooSmallBatch())

    document = _assert_problem(_post(ORDER), 413)

    assert "does not fit in one batch" in document["detail"]


# -- what a 503 says is true: the acceptance is recorded before the send --------------------


class AcceptanceDownOnce(InMemoryOrderProgress):
    """Table Storage out of reach for the first acceptance."""

    def __init__(self) -> None:
        super().__init__()
        self.down = 1

    def accept(self, job_id: str, session_id: str, at: str) -> None:
        if self.down:
            self.down -= 1
            raise ServiceUnavailable("Table Storage", "ServiceRequestError")
        super().accept(job_id, session_id, at)


def test_an_acceptance_that_cannot_be_recorded_sends_nothing_and_a_retry_is_one_job(
    twins: Twins,
) -> None:
    orders = AcceptanceDownOnce()
    twins.container.override(order_progress=orders)

    refused = _post(ORDER)  # no Idempotency-Key: each attempt is a new job id
    again = _post(ORDER)

    document = _assert_problem(refused, 503)
    assert "nothing was done that the retry would do twice" in document["detail"]
    assert again.status_code == 202
    [(_, session_id, _)] = twins.sender.sessions  # one job, whatever the client retried
    assert session_id == _json(again)["session_id"]
    assert list(orders.accepted) == [session_id]


def test_a_send_that_fails_withdraws_the_acceptance(twins: Twins) -> None:
    twins.container.override(task_sender=ServiceBusTaskSender(unreachable_service_bus()))

    _assert_problem(_post(ORDER), 503)

    assert twins.orders.accepted == {}  # no job left "accepted" that never went out


class Unconfirmed:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def send_session(
        self, queue_name: str, session_id: str, messages: Sequence[TaskMessage]
    ) -> None:
        self.sent.append(session_id)
        raise SendUnconfirmed("OperationTimeoutError")


def test_a_send_service_bus_did_not_confirm_says_the_job_may_run_and_keeps_it_known(
    twins: Twins,
) -> None:
    twins.container.override(task_sender=Unconfirmed())

    document = _assert_problem(_post(ORDER, {"Idempotency-Key": "order-8"}), 503)

    [job_id] = twins.orders.accepted
    assert document["job_id"] == job_id
    assert "may have gone out" in document["detail"] and job_id in document["detail"]
    assert "nothing was done" not in document["detail"]


class ResultNotStored(InMemoryIdempotencyRecords):
    def finish(self, scope: str, key: str, record: IdempotencyRecord) -> None:
        raise ServiceUnavailable("Table Storage", "ServiceRequestError")


def test_a_started_order_whose_key_result_cannot_be_stored_is_still_a_202(twins: Twins) -> None:
    twins.container.override(idempotency_records=ResultNotStored())

    first = _post(ORDER, {"Idempotency-Key": "order-9"})
    repeat = _post(ORDER, {"Idempotency-Key": "order-9"})

    assert first.status_code == 202  # the job went out: the answer says so
    assert len(twins.sender.sessions) == 1
    assert repeat.status_code == 409 and repeat.headers["Retry-After"] == "5"  # in flight
    assert len(twins.sender.sessions) == 1
