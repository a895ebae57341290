"""Archive and replay on real services: dead letters produced on the project's Service Bus
emulator are archived into a real Azurite and replayed back onto the emulator, through the
app's own composition root (``shared.bootstrap.Container``) and, for the HTTP API and the bulk
replay queue trigger, through the function bindings themselves."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from email.message import EmailMessage
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote

import azure.functions as func
import pytest
from azure.data.tables import TableServiceClient
from azure.servicebus import ServiceBusClient
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueClient, TextBase64DecodePolicy

from localdev.email_http import RunningEmailService
from shared.adapters.azure_clients import (
    DEAD_LETTER_BODIES_CONTAINER,
    PAYMENTS_TABLE,
    PRODUCTS_TABLE,
    ensure_storage,
    queue_service,
)
from shared.adapters.simulated_payments import TableSimulatedPaymentGateway
from shared.adapters.table_products import TableProductCatalog
from shared.bootstrap import Container, use_container
from shared.bootstrap.declared import APP_TABLES
from shared.config import StorageConnectionSettings
from shared.domain.archive import (
    AlreadyReplayed,
    ReplayIncomplete,
    SessionNotArchived,
    replay_session_id,
)
from shared.domain.envelope import TaskMessage, parse_task_message
from shared.domain.errors import ServiceUnavailable
from shared.domain.pipelines import IMPORT_PRODUCT, PRODUCT_IMPORT, PURCHASE, import_message
from shared.domain.products import Product
from shared.domain.receipt_emails import receipt_request_id
from shared.domain.session_state import decode_session_state
from shared.entrypoints.bulk_http import get_replay, request_replay
from shared.entrypoints.failed_sessions_http import (
    get_failed_session,
    replay_failed_session,
)
from shared.entrypoints.imports_http import get_import
from shared.entrypoints.replay_queue import replay_requests
from shared.service_layer.dead_letters import archive_dead_letters
from shared.service_layer.jobs import start_job
from shared.service_layer.processor import FailurePolicy, Outcome, RetryPolicy, SessionProcessor
from shared.service_layer.product_import_tasks import import_product
from shared.service_layer.receipt_mailer import ReceiptMailer
from shared.service_layer.replay import replay_session
from tests.builders import PIPELINES, app_settings, order_document

from .conftest import POOL_LOCK_SECONDS, ServiceBusEmulator
from .servicebus import (
    Received,
    SessionRunner,
    dead_letter_session,
    get_session_state,
    outcomes,
    receive_session,
    received,
    send_interleaved,
    send_tasks,
    tasks,
)

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def app_environ(
    azurite_connection_string: str,
    storage_settings: StorageConnectionSettings,
    table_service_client: TableServiceClient,
    blob_service_client: BlobServiceClient,
    servicebus_connection_string: str,
    email_service: RunningEmailService,
    session_queue: str,
) -> Iterator[dict[str, str]]:
    """The app's settings for Azurite, the emulator (purchases on this test's own queue, a
    replay queue of its own) and the session's e-mail stand-in."""
    replay_queue = f"replays-{uuid.uuid4().hex[:12]}"
    ensure_storage(
        table_service_client,
        blob_service_client,
        queue_service(storage_settings),
        queues=[replay_queue],
        tables=APP_TABLES,
    )
    yield {
        **{p.queue_setting: p.default_queue for p in PIPELINES},  # every pipeline's queue
        "PURCHASE_QUEUE_NAME": session_queue,
        "REPLAY_QUEUE_NAME": replay_queue,
        "ServiceBusConnection": servicebus_connection_string,
        "AzureWebJobsStorage": azurite_connection_string,
        "CommunicationServicesConnection": email_service.connection_string,
        "TASK_RETRY_WINDOW_SECONDS": "0",
        "PUBLIC_BASE_URL": "http://localhost:7071",  # where the API's URLs start
    }
    queue_service(storage_settings).delete_queue(replay_queue)


@pytest.fixture
def make_container(app_environ: dict[str, str]) -> Iterator[Callable[..., Container]]:
    """Containers of the app on ``app_environ``; settings can be overridden per container."""
    made: list[Container] = []

    def make(**overrides: str) -> Container:
        container = Container(app_settings({**app_environ, **overrides}))
        made.append(container)
        return container

    yield make
    use_container(None)
    for container in made:
        if container.built("_service_bus"):
            container._service_bus.close()


def archive_all(container: Container, queue: str, *, expected: int) -> None:
    """Run the archive until ``expected`` dead letters were moved (a lock held by a crashed
    run must run out first)."""
    moved = 0
    deadline = time.monotonic() + POOL_LOCK_SECONDS + 15
    while moved < expected and time.monotonic() < deadline:
        report = archive_dead_letters(
            container.dead_letter_source, container.archive, queues=[queue], max_seconds=30
        )
        moved += report.total
    assert moved == expected


def failing_from(step: int, reason: str) -> Callable[[Received], tuple[str, str] | None]:
    """Dead-letter as the processor does when ``step`` fails: that one with ``reason``, the
    later ones with SessionFailed; the earlier ones completed."""

    def verdict(message: Received) -> tuple[str, str] | None:
        current = parse_task_message(message.body).step
        if current < step:
            return None
        if current == step:
            return (reason, f"step {current} failed")
        return ("SessionFailed", f"Not run: the session failed at step {step}")

    return verdict


def receipts_of(email_service: RunningEmailService, job_id: str) -> list[EmailMessage]:
    wanted = f"<{job_id}.receipt@pipelines.local>"
    return [m for m in email_service.received() if m["Message-ID"] == wanted]


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


# -- archive ----------------------------------------------------------------------------------

HOSTILE = {
    "slash": "orders/2026/11",
    "backslash": "C:\\temp\\x",
    "hash": "order#42",
    "question": "what?really",
    "control": "tab\there\x01bell",
}


def test_dead_letters_are_archived_per_session_in_send_order_then_completed(
    make_container: Callable[..., Container],
    servicebus_client: ServiceBusClient,
    servicebus_emulator: ServiceBusEmulator,
    session_queue: str,
) -> None:
    container = make_container()
    run = uuid.uuid4().hex
    session_ids = [f"{hostile}-{run[:8]}" for hostile in HOSTILE.values()]
    session_ids.append("s" * 95 + "/" + run)  # 128 characters: the longest Service Bus allows
    assert len(session_ids[-1]) == 128
    send_interleaved(
        servicebus_client,
        session_queue,
        {sid: tasks(f"job-{n}-{run}", 3) for n, sid in enumerate(session_ids)},
    )
    for sid in session_ids:  # settled last-first: the dead-letter queue is in reverse order
        dead_letter_session(
            servicebus_client, session_queue, sid, failing_from(1, "UnknownSku"), reverse=True
        )
    assert servicebus_emulator.counts(session_queue)["dead_lettered"] == 18

    report = archive_dead_letters(
        container.dead_letter_source, container.archive, queues=[session_queue]
    )

    assert report.total == 18 and report.sessions == set(session_ids)
    assert servicebus_emulator.counts(session_queue)["dead_lettered"] == 0
    for sid in session_ids:
        rows = container.archive.list_session(sid)
        assert [r.session_id for r in rows] == [sid] * 3
        assert [r.step for r in rows] == [1, 2, 3]  # send order, not dead-letter order
        assert [r.reason for r in rows] == ["UnknownSku", "SessionFailed", "SessionFailed"]
        assert rows[-1].is_last and rows[0].queue == session_queue
        summary = container.archive.get_summary(sid)
        assert (summary.failed_task, summary.reason, summary.message_count) == (
            "GenerateOrderNumber",
            "UnknownSku",
            3,
        )


class CrashesAfterTheRowWrite:
    """The archive as a worker sees it when the process dies right after the table write."""

    def __init__(self, archive: Any) -> None:
        self._archive = archive

    def __getattr__(self, name: str) -> Any:
        return getattr(self._archive, name)

    def save(self, rows: Any) -> int:
        self._archive.save(rows)
        raise RuntimeError("the worker died between the row write and the completion")


# The archive run of a worker process that is killed (no cleanup, as kill -9: its connection
# to Service Bus just drops) right after the table write.
KILLED_ARCHIVE_RUN = """
import json, os, sys
from shared.bootstrap import Container
from shared.service_layer.dead_letters import archive_dead_letters
from tests.builders import app_settings
from shared.service_layer.product_import_tasks import import_product

class DiesAfterTheRowWrite:
    def __init__(self, archive):
        self._archive = archive
    def __getattr__(self, name):
        return getattr(self._archive, name)
    def save(self, rows):
        self._archive.save(rows)
        os._exit(9)

container = Container(app_settings(json.loads(sys.argv[1])))
archive_dead_letters(
    container.dead_letter_source, DiesAfterTheRowWrite(container.archive), queues=[sys.argv[2]]
)
"""


@pytest.mark.parametrize("crash", ["exception", "killed process"])
def test_a_crash_between_the_row_write_and_the_completion_leaves_one_row(
    make_container: Callable[..., Container],
    app_environ: dict[str, str],
    servicebus_client: ServiceBusClient,
    servicebus_emulator: ServiceBusEmulator,
    session_queue: str,
    crash: str,
) -> None:
    container = make_container()
    sid = unique("crash")
    send_tasks(servicebus_client, session_queue, sid, tasks(unique("job"), 3))
    dead_letter_session(servicebus_client, session_queue, sid, failing_from(1, "Boom"))

    if crash == "exception":
        with pytest.raises(RuntimeError, match="worker died"):
            archive_dead_letters(
                container.dead_letter_source,
                CrashesAfterTheRowWrite(container.archive),
                queues=[session_queue],
            )
    else:
        worker = subprocess.run(
            [sys.executable, "-c", KILLED_ARCHIVE_RUN, json.dumps(app_environ), session_queue],
            cwd=REPO,
            capture_output=True,
            timeout=120,
        )
        assert worker.returncode == 9, worker.stderr.decode()

    # The rows are there, and so are the dead letters: nothing was lost.
    assert len(container.archive.list_session(sid)) == 3
    assert servicebus_emulator.counts(session_queue)["dead_lettered"] == 3

    archive_all(container, session_queue, expected=3)  # the next run, once the lock runs out

    rows = container.archive.list_session(sid)
    assert [r.step for r in rows] == [1, 2, 3]  # one row each, not two
    assert servicebus_emulator.counts(session_queue)["dead_lettered"] == 0


# -- replay -----------------------------------------------------------------------------------


def test_replay_sends_the_session_in_its_original_order_with_bodies_byte_exact(
    make_container: Callable[..., Container],
    servicebus_client: ServiceBusClient,
    blob_service_client: BlobServiceClient,
    session_queue: str,
) -> None:
    container = make_container()
    sid, other = unique("order"), unique("other")
    job = unique("job")
    original = tasks(job, 5, filler=200 * 1024)  # step 2 carries 200 KiB: stored in Blob
    send_interleaved(
        servicebus_client, session_queue, {sid: original, other: tasks(unique("job"), 5)}
    )
    for session in (sid, other):
        dead_letter_session(
            servicebus_client, session_queue, session, failing_from(2, "Boom"), reverse=True
        )
    archive_all(container, session_queue, expected=8)
    rows = container.archive.list_session(sid)
    big = [r for r in rows if r.step == 2]
    assert len(big) == 1 and len(big[0].body) > 200 * 1024
    bodies = blob_service_client.get_container_client(DEAD_LETTER_BODIES_CONTAINER)
    assert any(blob.size == len(big[0].body) for blob in bodies.list_blobs())

    result = replay_session(
        container.archive,
        container.resender,
        container.session_seeder,
        sid,
        "key-1",
        pipelines=PIPELINES,
    )

    assert result.sent == 4 and result.new_session_id == replay_session_id(sid, "key-1")
    state = decode_session_state(
        get_session_state(servicebus_client, session_queue, result.new_session_id)
    )
    assert state is not None and state.next_step == 2  # resumes where the session failed
    replayed = receive_session(servicebus_client, session_queue, result.new_session_id)
    assert [parse_task_message(m.body).step for m in replayed] == [2, 3, 4, 5]
    assert [m.body for m in replayed] == [r.body for r in rows]
    assert replayed[0].body == original[1].to_json()  # the 200 KiB one, byte for byte
    assert [m.message_id for m in replayed] == [
        f"{result.new_session_id}:{r.row_key}" for r in rows
    ]
    assert {m.application_properties["replay_of"] for m in replayed} == {sid}
    assert container.archive.get_summary(sid).status == "replayed"
    assert container.archive.get_summary(other).status == "failed"


class LosesTheFirstMark:
    """The archive of a worker that dies after sending the replay, before marking the rows."""

    def __init__(self, archive: Any) -> None:
        self._archive = archive
        self.lost = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._archive, name)

    def mark_replayed(self, rows: Any) -> None:
        if not self.lost:
            self.lost = True
            raise RuntimeError("died before marking the rows replayed")
        self._archive.mark_replayed(rows)


def test_a_repeated_replay_with_the_same_key_sends_nothing_new(
    make_container: Callable[..., Container],
    servicebus_client: ServiceBusClient,
    session_queue: str,
) -> None:
    container = make_container()
    sid = unique("again")
    send_tasks(servicebus_client, session_queue, sid, tasks(unique("job"), 4))
    dead_letter_session(servicebus_client, session_queue, sid, failing_from(1, "Boom"))
    archive_all(container, session_queue, expected=4)
    archive = LosesTheFirstMark(container.archive)

    def replay(key: str) -> Any:
        return replay_session(
            archive, container.resender, container.session_seeder, sid, key, pipelines=PIPELINES
        )

    with pytest.raises(RuntimeError, match="died before marking"):
        replay("key")  # sent, but the rows were not marked
    second = replay("key")  # sends again: duplicate detection drops every message
    third = replay("key")  # the rows are marked now: nothing is even sent
    with pytest.raises(AlreadyReplayed):
        replay("another key")

    assert (second.sent, third.sent) == (4, 0)
    assert second.new_session_id == third.new_session_id
    replayed = receive_session(servicebus_client, session_queue, third.new_session_id)
    assert [parse_task_message(m.body).step for m in replayed] == [1, 2, 3, 4]


def _http(
    method: str,
    path: str,
    *,
    route_params: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    params: dict[str, str] | None = None,
    body: Any = None,
) -> func.HttpRequest:
    return func.HttpRequest(
        method=method,
        url=f"http://localhost:7071/api/{path}",
        headers={"Content-Type": "application/json", **(headers or {})},
        params=params or {},
        route_params=route_params or {},
        body=json.dumps(body).encode() if body is not None else b"",
    )


def _document(response: func.HttpResponse, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.get_body()
    document: dict[str, Any] = json.loads(response.get_body())
    return document


def replay_status(request_id: str) -> dict[str, Any]:
    """GET /api/replays/{request_id}, through its binding."""
    request = _http("GET", f"replays/{request_id}", route_params={"request_id": request_id})
    return _document(get_replay(request), 200)


def deliver_replay_request(storage: StorageConnectionSettings, container: Container) -> None:
    """The queue trigger, as the host runs it: the one message on the replay queue is handed
    to the function, then deleted."""
    queue = QueueClient.from_connection_string(
        storage.connection_string or "",
        container.settings.replay_queue_name,
        message_decode_policy=TextBase64DecodePolicy(),
    )
    [message] = list(queue.receive_messages(max_messages=32))
    replay_requests(func.QueueMessage(id=message.id, body=message.content.encode()))
    queue.delete_message(message)


def test_replay_of_an_unknown_session_is_404_and_of_an_incomplete_one_409(
    make_container: Callable[..., Container],
    servicebus_client: ServiceBusClient,
    session_queue: str,
) -> None:
    container = make_container()
    use_container(container)
    sid = unique("half/way")  # its last message is not in the archive
    send_tasks(servicebus_client, session_queue, sid, tasks(unique("job"), 2, total=5))
    dead_letter_session(servicebus_client, session_queue, sid, failing_from(1, "Boom"))
    archive_all(container, session_queue, expected=2)

    def post(session_id: str, **params: str) -> func.HttpResponse:
        return replay_failed_session(
            _http(
                "POST",
                f"failed-sessions/{quote(session_id, safe='')}/replay",
                route_params={"session_id": quote(session_id, safe="")},
                headers={"Idempotency-Key": "k-1"},
                params=params,
            )
        )

    unknown = post(unique("never-failed"))
    incomplete = post(sid)

    assert _document(unknown, 404)["title"] == "Unknown session"
    assert unknown.headers["Content-Type"].startswith("application/problem+json")
    assert "not its last" in _document(incomplete, 409)["detail"]
    with pytest.raises(SessionNotArchived):
        replay_session(
            container.archive,
            container.resender,
            container.session_seeder,
            "nope",
            "k",
            pipelines=PIPELINES,
        )
    with pytest.raises(ReplayIncomplete):
        replay_session(
            container.archive,
            container.resender,
            container.session_seeder,
            sid,
            "k",
            pipelines=PIPELINES,
        )
    assert receive_session(servicebus_client, session_queue, replay_session_id(sid, "k-1")) == []

    forced = _document(post(sid, force="true"), 202)

    replayed = receive_session(servicebus_client, session_queue, forced["new_session_id"])
    assert [parse_task_message(m.body).step for m in replayed] == [1, 2]
    shown = _document(
        get_failed_session(
            _http(
                "GET",
                f"failed-sessions/{quote(sid, safe='')}",
                route_params={"session_id": quote(sid, safe="")},
            )
        ),
        200,
    )
    assert shown["status"] == "replayed" and [m["step"] for m in shown["messages"]] == [1, 2]


def test_bulk_replay_through_the_storage_queue_replays_every_matching_session(
    make_container: Callable[..., Container],
    servicebus_client: ServiceBusClient,
    storage_settings: StorageConnectionSettings,
    session_queue: str,
) -> None:
    container = make_container()
    use_container(container)
    payment_failures = [unique("pay") for _ in range(3)]
    unknown_sku = unique("sku")
    sessions: dict[str, Sequence[TaskMessage]] = {
        sid: tasks(unique("job"), 5) for sid in [*payment_failures, unknown_sku]
    }
    send_interleaved(servicebus_client, session_queue, sessions)
    for sid in payment_failures:
        dead_letter_session(
            servicebus_client,
            session_queue,
            sid,
            failing_from(3, "PaymentProviderUnavailable"),
        )
    dead_letter_session(
        servicebus_client, session_queue, unknown_sku, failing_from(2, "UnknownSku")
    )
    archive_all(container, session_queue, expected=3 * 3 + 4)

    accepted = _document(
        request_replay(
            _http(
                "POST",
                "replays",
                body={"queue": session_queue, "task": "ProcessPayment"},
            )
        ),
        202,
    )
    request_id = accepted["request_id"]
    assert accepted["status_url"].endswith(f"/api/replays/{request_id}")

    queued = replay_status(request_id)
    assert (queued["status"], queued["found"]) == ("queued", 0)
    deliver_replay_request(storage_settings, container)

    progress = replay_status(request_id)
    assert (progress["status"], progress["found"], progress["sent"], progress["failed"]) == (
        "completed",
        3,
        3,
        0,
    )
    for sid in payment_failures:
        new_session = replay_session_id(sid, f"bulk:{request_id}")
        replayed = receive_session(servicebus_client, session_queue, new_session)
        assert [parse_task_message(m.body).step for m in replayed] == [3, 4, 5]
        assert container.archive.get_summary(sid).status == "replayed"
    assert container.archive.get_summary(unknown_sku).status == "failed"
    assert (
        receive_session(
            servicebus_client, session_queue, replay_session_id(unknown_sku, f"bulk:{request_id}")
        )
        == []
    )


# -- import sessions: only the bad rows are dead-lettered, the rest are imported ------------


class CatalogDownFor:
    """The real catalog, unreachable for some SKUs: an outage that hits rows 3 and 7."""

    def __init__(self, catalog: TableProductCatalog, skus: set[str]) -> None:
        self._catalog = catalog
        self._skus = skus

    def find(self, skus: Any) -> Any:
        return self._catalog.find(skus)

    def upsert(self, product: Product) -> None:
        if product.sku in self._skus:
            raise ConnectionError("the catalog table cannot be reached")
        self._catalog.upsert(product)

    def upsert_many(self, products: Sequence[Product]) -> None:
        for product in products:
            self.upsert(product)


def failed_import_session(
    container: Container,
    servicebus_client: ServiceBusClient,
    session_runner: SessionRunner,
    catalog: TableProductCatalog,
    queue: str,
    *,
    bad_rows: tuple[int, ...] = (3, 7),
    rows: int = 10,
) -> tuple[str, list[str]]:
    """An import session of ``rows`` rows run by the import processor while the catalog was
    down for ``bad_rows``: those are dead-lettered (ContinueOnFailure), the others imported,
    and the dead letters archived. Returns the session id and the rows' SKUs."""
    sid, job = unique("import"), unique("job")
    skus = [f"{unique('SKU')}-{step}" for step in range(1, rows + 1)]
    messages = [
        import_message(
            job,
            step,
            is_last=step == rows,
            row={"sku": sku, "name": f"Row {step}", "price": "9.50", "currency": "EUR"},
        )
        for step, sku in enumerate(skus, start=1)
    ]
    send_tasks(servicebus_client, queue, sid, messages)
    during_outage = SessionProcessor(
        pipeline=PRODUCT_IMPORT,
        tasks={
            IMPORT_PRODUCT: partial(
                import_product, CatalogDownFor(catalog, {skus[n - 1] for n in bad_rows})
            )
        },
        policy=FailurePolicy.CONTINUE_ON_FAILURE,
        retry=RetryPolicy(window=0),
        journal=container.archive,
    )
    results = session_runner.run(queue, sid, during_outage)
    got = outcomes(results)
    assert got.count(Outcome.COMPLETED) == rows - len(bad_rows)
    assert got.count(Outcome.DEAD_LETTERED) == len(bad_rows)
    assert get_session_state(servicebus_client, queue, sid) is None  # row 10 cleared it
    archive_all(container, queue, expected=len(bad_rows))
    return sid, skus


def test_an_import_session_with_bad_rows_is_replayed_without_force_and_closes_its_session(
    make_container: Callable[..., Container],
    servicebus_client: ServiceBusClient,
    servicebus_emulator: ServiceBusEmulator,
    session_runner: SessionRunner,
    table_service_client: TableServiceClient,
    session_queue: str,
) -> None:
    container = make_container()
    use_container(container)
    catalog = TableProductCatalog(table_service_client.get_table_client(PRODUCTS_TABLE))
    sid, skus = failed_import_session(
        container, servicebus_client, session_runner, catalog, session_queue
    )
    summary = container.archive.get_summary(sid)
    assert (summary.message_count, summary.has_last) == (2, False)  # row 10 was imported

    response = replay_failed_session(
        _http(
            "POST",
            f"failed-sessions/{sid}/replay",
            route_params={"session_id": sid},
            headers={"Idempotency-Key": "catalog-is-back"},
        )
    )
    accepted = _document(response, 202)

    new_session = replay_session_id(sid, "catalog-is-back")
    assert accepted["new_session_id"] == new_session
    rows = container.archive.list_session(sid)
    # The replayed rows are the import job's: its status is where to follow them.
    job = rows[0].job_id
    assert job is not None
    assert (
        response.headers["Location"] == f"http://localhost:7071/api/imports/{quote(job, safe='')}"
    )
    with servicebus_client.get_queue_receiver(session_queue, session_id=new_session) as receiver:
        sent = [received(m) for m in receiver.peek_messages(max_message_count=10)]
    assert [parse_task_message(m.body).step for m in sent] == [3, 7]
    assert [m.message_id for m in sent] == [f"{new_session}:{r.row_key}" for r in rows]
    assert sent[0].body == rows[0].body  # as it was
    # The last one sent closes the new session: is_last, in the body and the properties.
    assert [parse_task_message(m.body).is_last for m in sent] == [False, True]
    assert [m.application_properties["is_last"] for m in sent] == [False, True]
    seeded = decode_session_state(get_session_state(servicebus_client, session_queue, new_session))
    assert seeded is not None and seeded.next_step == 3

    resumed = session_runner.run(session_queue, new_session, container.processor(PRODUCT_IMPORT))

    assert outcomes(resumed) == [Outcome.COMPLETED] * 2
    assert sorted(catalog.find([skus[2], skus[6]])) == sorted([skus[2], skus[6]])
    assert get_session_state(servicebus_client, session_queue, new_session) is None
    assert container.archive.get_summary(sid).status == "replayed"
    counts = servicebus_emulator.counts(session_queue)
    assert (counts["active"], counts["dead_lettered"]) == (0, 0)
    followed = get_import(_http("GET", f"imports/{job}", route_params={"job_id": job}))
    assert _document(followed, 200)["job_id"] == job


def test_bulk_replay_by_reason_replays_an_import_session(
    make_container: Callable[..., Container],
    servicebus_client: ServiceBusClient,
    session_runner: SessionRunner,
    table_service_client: TableServiceClient,
    storage_settings: StorageConnectionSettings,
    session_queue: str,
) -> None:
    container = make_container()
    use_container(container)
    catalog = TableProductCatalog(table_service_client.get_table_client(PRODUCTS_TABLE))
    sid, _ = failed_import_session(
        container, servicebus_client, session_runner, catalog, session_queue
    )
    reason = container.archive.get_summary(sid).reason
    assert reason == "UnhandledError"

    accepted = _document(
        request_replay(_http("POST", "replays", body={"queue": session_queue, "reason": reason})),
        202,
    )
    deliver_replay_request(storage_settings, container)

    request_id = accepted["request_id"]
    progress = replay_status(request_id)
    assert (progress["status"], progress["found"], progress["sent"], progress["failed"]) == (
        "completed",
        1,
        1,
        0,
    )
    new_session = replay_session_id(sid, f"bulk:{request_id}")
    replayed = receive_session(servicebus_client, session_queue, new_session)
    assert [parse_task_message(m.body).step for m in replayed] == [3, 7]
    assert parse_task_message(replayed[-1].body).is_last
    assert container.archive.get_summary(sid).status == "replayed"


# -- a purchase whose receipt went out but was never recorded, replayed ---------------------


def test_a_replay_of_a_session_whose_receipt_went_out_sends_the_same_request_and_no_mail(
    make_container: Callable[..., Container],
    session_runner: SessionRunner,
    email_service: RunningEmailService,
    table_service_client: TableServiceClient,
    session_queue: str,
) -> None:
    # Given: a purchase whose receipt the mail service sent, while Table Storage refused every
    # write after the send, so that its last task gave up (TableStorageUnavailable, at once: its
    # retry window is 0 s here) and was archived
    sku = unique("SKU")
    TableProductCatalog(table_service_client.get_table_client(PRODUCTS_TABLE)).upsert(
        Product(sku=sku, name="Teapot", price=Decimal("20.00"), currency="EUR")
    )
    storage_down = make_container()

    def refused(job_id: str) -> None:
        raise ServiceUnavailable("Table Storage", "connection refused")

    storage_down.override(
        receipt_mailer=ReceiptMailer(
            storage_down.receipt_emails, storage_down.email, after_send=refused
        )
    )
    order = start_job(
        PIPELINES.get(PURCHASE),
        order_document(lines=[{"sku": sku, "quantity": 1}]),
        sender=storage_down.task_sender,
        queue_name=session_queue,
    )
    first = session_runner.run(session_queue, order.session_id, storage_down.processor(PURCHASE))
    assert outcomes(first)[-1] is Outcome.DEAD_LETTERED
    archive_all(storage_down, session_queue, expected=1)
    assert storage_down.archive.get_summary(order.session_id).failed_task == "SendReceiptEmail"
    (sent,) = receipts_of(email_service, order.job_id)
    sends_before = email_service.service.sends

    # When: the session is replayed (a new session, with a fresh session state)
    storage_back = make_container()
    use_container(storage_back)
    accepted = _document(
        replay_failed_session(
            _http(
                "POST",
                f"failed-sessions/{order.session_id}/replay",
                route_params={"session_id": order.session_id},
                headers={"Idempotency-Key": "after-storage-is-back"},
            )
        ),
        202,
    )
    resumed = session_runner.run(
        session_queue, accepted["new_session_id"], storage_back.processor(PURCHASE)
    )

    # Then: the task sent the same request again (its id from the job and step, its first-sent
    # time from the record), the service answered the first result, and no mail went out
    assert outcomes(resumed) == [Outcome.COMPLETED]
    assert email_service.service.sends == sends_before + 1
    assert receipts_of(email_service, order.job_id) == [sent]
    record = storage_back.receipt_emails.find(order.job_id)
    assert record is not None
    assert (record.status, record.attempts) == ("sent", 2)
    assert record.request_id == record.operation_id == receipt_request_id(order.job_id, 5)
    assert [m.request_id for m in email_service.sent() if m.operation_id == record.request_id] == [
        record.request_id
    ]


# -- a purchase that failed at ProcessPayment, replayed once the provider is back ------------


def test_a_replayed_purchase_resumes_with_its_original_order_number_and_total(
    make_container: Callable[..., Container],
    servicebus_client: ServiceBusClient,
    servicebus_emulator: ServiceBusEmulator,
    session_runner: SessionRunner,
    email_service: RunningEmailService,
    table_service_client: TableServiceClient,
    session_queue: str,
) -> None:
    card = unique("tok_outage")
    during_outage = make_container(PAYMENT_SIMULATOR_OUTAGE_TOKENS=card)
    sku = unique("SKU")
    TableProductCatalog(table_service_client.get_table_client(PRODUCTS_TABLE)).upsert(
        Product(sku=sku, name="Teapot", price=Decimal("20.00"), currency="EUR")
    )
    order = start_job(
        PIPELINES.get(PURCHASE),
        order_document(card_token=card, lines=[{"sku": sku, "quantity": 2}]),
        sender=during_outage.task_sender,
        queue_name=session_queue,
    )

    failed = session_runner.run(session_queue, order.session_id, during_outage.processor(PURCHASE))

    assert outcomes(failed) == [
        Outcome.COMPLETED,  # GenerateOrderNumber
        Outcome.COMPLETED,  # CalculateTotal
        Outcome.DEAD_LETTERED,  # ProcessPayment: PaymentProviderUnavailable (window 0 s)
        Outcome.DEAD_LETTERED,  # GenerateReceipt: SessionFailed
        Outcome.DEAD_LETTERED,  # SendReceiptEmail: SessionFailed
    ]
    archive_all(during_outage, session_queue, expected=3)
    summary = during_outage.archive.get_summary(order.session_id)
    assert (summary.failed_task, summary.reason) == (
        "ProcessPayment",
        "PaymentProviderUnavailable",
    )
    order_number, total = summary.context["order_number"], summary.context["total"]
    assert Decimal(total) == Decimal("54.95")  # 2 x 20.00, 25 % tax, 4.95 shipping
    assert receipts_of(email_service, order.job_id) == []

    provider_back = make_container()  # the same tables, no outage
    use_container(provider_back)
    accepted = _document(
        replay_failed_session(
            _http(
                "POST",
                f"failed-sessions/{order.session_id}/replay",
                route_params={"session_id": order.session_id},
                headers={"Idempotency-Key": "after-the-outage"},
            )
        ),
        202,
    )
    resumed = session_runner.run(
        session_queue, accepted["new_session_id"], provider_back.processor(PURCHASE)
    )

    assert outcomes(resumed) == [Outcome.COMPLETED] * 3
    [email] = receipts_of(email_service, order.job_id)
    assert email["Subject"] == f"Your receipt for order {order_number}"
    body = email.get_body(preferencelist=("plain",))
    assert body is not None and f"We charged {total} EUR" in body.get_content()
    [attachment] = list(email.iter_attachments())
    assert attachment.get_filename() == f"{order_number}.pdf"
    charges = TableSimulatedPaymentGateway(
        table_service_client.get_table_client(PAYMENTS_TABLE)
    ).list_charges()
    [charge] = [c for c in charges if c.idempotency_key == f"{order.job_id}:payment"]
    assert charge.amount == Decimal(total)
    assert servicebus_emulator.counts(session_queue)["active"] == 0
