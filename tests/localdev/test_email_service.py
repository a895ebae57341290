"""The local stand-in for Azure Communication Services Email, through Microsoft's own client
(azure-communication-email): the send and its operation, repeatable requests as Microsoft's
"Repeatability of Requests" table states them, HMAC signing, and the mailbox the demo and
the tests read."""

from __future__ import annotations

import base64
import threading
import uuid
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.communication.email import EmailClient
from azure.core.credentials import AzureKeyCredential
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError

from localdev.email_http import RunningEmailService, run_email_service
from localdev.email_service import EmailService, Reply, imf_fixdate


@pytest.fixture
def stand_in() -> Iterator[RunningEmailService]:
    with run_email_service(drop=frozenset({"dropped@example.com"})) as running:
        yield running


def client(running: RunningEmailService, key: str | None = None) -> EmailClient:
    return EmailClient(running.endpoint, AzureKeyCredential(key or running.access_key))


def message(to: str = "ada@example.com", subject: str = "Your receipt") -> dict[str, Any]:
    return {
        "senderAddress": "DoNotReply@shop.example",
        "recipients": {"to": [{"address": to}]},
        "content": {"subject": subject, "plainText": "Thank you."},
        "headers": {"Message-ID": "<job-1.receipt@pipelines.local>"},
        "attachments": [
            {
                "name": "1.pdf",
                "contentType": "application/pdf",
                "contentInBase64": base64.b64encode(b"%PDF-1.4 receipt").decode(),
            }
        ],
    }


def repeatable(request_id: str, first_sent: datetime) -> dict[str, str]:
    return {
        "Repeatability-Request-Id": request_id,
        "Repeatability-First-Sent": imf_fixdate(first_sent),
    }


def send(running: RunningEmailService, body: Mapping[str, Any], **options: Any) -> Any:
    poller = client(running).begin_send(dict(body), polling_interval=0.05, **options)
    return poller.result(timeout=10)


def test_a_send_is_an_operation_followed_to_success_and_the_mail_is_in_the_mailbox(
    stand_in: RunningEmailService,
) -> None:
    operation_id = str(uuid.uuid4())

    result = send(stand_in, message(), operation_id=operation_id)

    assert result == {"id": operation_id, "status": "Succeeded"}
    (mail,) = stand_in.received()
    assert (mail["To"], mail["Subject"]) == ("ada@example.com", "Your receipt")
    assert mail["Message-ID"] == "<job-1.receipt@pipelines.local>"
    (attachment,) = mail.iter_attachments()
    assert attachment.get_filename() == "1.pdf"
    assert attachment.get_content() == b"%PDF-1.4 receipt"
    assert stand_in.message_ids() == ["<job-1.receipt@pipelines.local>"]


def test_a_repeat_within_the_window_answers_the_first_result_and_sends_nothing_more(
    stand_in: RunningEmailService,
) -> None:
    request_id = str(uuid.uuid4())
    headers = repeatable(request_id, datetime.now(UTC) - timedelta(minutes=4))

    first = send(stand_in, message(), operation_id=request_id, headers=headers)
    again = send(stand_in, message(), operation_id=request_id, headers=headers)

    assert first == again == {"id": request_id, "status": "Succeeded"}
    assert stand_in.count() == 1


def test_a_first_sent_time_outside_the_window_is_412_and_nothing_is_sent(
    stand_in: RunningEmailService,
) -> None:
    headers = repeatable(str(uuid.uuid4()), datetime.now(UTC) - timedelta(minutes=5, seconds=5))

    with pytest.raises(HttpResponseError) as refused:
        send(stand_in, message(), headers=headers)

    assert refused.value.status_code == 412
    assert stand_in.count() == 0


def test_a_repeat_with_another_body_is_refused(stand_in: RunningEmailService) -> None:
    request_id = str(uuid.uuid4())
    headers = repeatable(request_id, datetime.now(UTC))
    send(stand_in, message(), headers=headers)

    with pytest.raises(HttpResponseError) as refused:
        send(stand_in, message(subject="Another"), headers=headers)

    assert refused.value.status_code == 400
    assert stand_in.count() == 1


@pytest.mark.parametrize(
    "headers",
    [
        {"Repeatability-Request-Id": "not-a-guid", "Repeatability-First-Sent": "now"},
        {"Repeatability-Request-Id": str(uuid.uuid4())},
        {
            "Repeatability-Request-Id": str(uuid.uuid4()),
            "Repeatability-First-Sent": "2026-01-01T00:00:00Z",  # not an IMF-fixdate
        },
    ],
    ids=["malformed id", "no first-sent", "first-sent not IMF-fixdate"],
)
def test_malformed_repeatability_headers_are_400(
    stand_in: RunningEmailService, headers: dict[str, str]
) -> None:
    with pytest.raises(HttpResponseError) as refused:
        send(stand_in, message(), headers=headers)

    assert refused.value.status_code == 400
    assert stand_in.count() == 0


def test_an_operation_runs_until_delivered_then_succeeds() -> None:
    with run_email_service(delivery_seconds=0.3) as running:
        operation_id = str(uuid.uuid4())
        client(running).begin_send(message(), operation_id=operation_id, polling=False)

        assert running.service.operation("2025-09-01", operation_id).body == {
            "id": operation_id,
            "status": "Running",
        }
        poller = client(running).begin_send(message(), polling_interval=0.05)
        assert poller.result(timeout=10)["status"] == "Succeeded"


def test_a_dropped_address_ends_its_operation_failed(stand_in: RunningEmailService) -> None:
    with pytest.raises(HttpResponseError) as failed:
        send(stand_in, message(to="dropped@example.com"))

    assert failed.value.response is not None
    assert "EmailDropped" in failed.value.response.text()
    assert stand_in.count() == 0


def test_a_request_signed_with_another_key_is_401(stand_in: RunningEmailService) -> None:
    other = base64.b64encode(b"not the stand-in's key").decode()

    with pytest.raises(ClientAuthenticationError) as refused:
        client(stand_in, other).begin_send(message())

    assert refused.value.status_code == 401
    assert stand_in.count() == 0


def test_an_unknown_api_version_is_400(stand_in: RunningEmailService) -> None:
    unknown = EmailClient(
        stand_in.endpoint, AzureKeyCredential(stand_in.access_key), api_version="2021-10-01"
    )
    with pytest.raises(HttpResponseError) as refused:
        unknown.begin_send(message())

    assert refused.value.status_code == 400


def test_a_repeat_while_the_first_is_still_handled_is_409() -> None:
    # Given: a first request held inside the service
    entered, release = threading.Event(), threading.Event()

    class Held(EmailService):
        def _carry_out(self, *args: Any) -> Reply:
            entered.set()
            release.wait(5)
            return super()._carry_out(*args)

    service = Held()
    body = str.encode(
        '{"senderAddress": "a@shop.example", "content": {"subject": "s"}, '
        '"recipients": {"to": [{"address": "b@example.com"}]}}'
    )
    headers = {k.lower(): v for k, v in repeatable(str(uuid.uuid4()), datetime.now(UTC)).items()}
    first: list[Reply] = []
    thread = threading.Thread(
        target=lambda: first.append(service.send("2025-09-01", headers, body))
    )
    thread.start()
    assert entered.wait(5)

    # When: it is repeated meanwhile
    repeat = service.send("2025-09-01", headers, body)
    release.set()
    thread.join()

    # Then: 409, and the first goes through once
    assert repeat.status == 409
    assert first[0].status == 202
    assert service.count() == 1
