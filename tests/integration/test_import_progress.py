"""Import row outcomes recorded through the processor's observer: import sessions on the
project's Service Bus emulator, products and progress on a real Azurite."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from azure.data.tables import TableClient, TableServiceClient
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from shared.adapters.servicebus_sender import to_service_bus_message
from shared.adapters.table_import_progress import TableImportProgress
from shared.adapters.table_products import TableProductCatalog
from shared.domain.import_jobs import JobManifest, import_job_status
from shared.domain.pipelines import PRODUCT_IMPORT, import_message
from shared.service_layer.observers import import_progress_observer
from shared.service_layer.ports import RowOutcome
from shared.service_layer.processor import (
    FailurePolicy,
    IncomingMessage,
    Outcome,
    RetryPolicy,
    SessionProcessor,
)
from shared.service_layer.product_import_tasks import import_tasks
from shared.service_layer.session_messages import Told
from tests.progress_cases import CASES, SESSION, Case, record
from tests.progress_cases import JOB as CASE_JOB

from .servicebus import SessionRunner, outcomes, send_raw

pytestmark = pytest.mark.integration


@pytest.fixture
def products(table_service_client: TableServiceClient) -> Iterator[TableClient]:
    name = f"p{uuid.uuid4().hex}"
    yield table_service_client.create_table(name)
    table_service_client.delete_table(name)


class DiesBeforeItsFirstCompletion:
    """The worker dies after the state is written and before the message is settled."""

    def __init__(self) -> None:
        self.crashed = False

    def __call__(self, actions: Any) -> Any:
        outer = self

        class Wrapped:
            def __getattr__(self, name: str) -> Any:
                return getattr(actions, name)

            def complete(self) -> None:
                if not outer.crashed:
                    outer.crashed = True
                    raise RuntimeError("worker died")
                actions.complete()

        return Wrapped()


def test_rows_are_counted_once_each_even_when_redelivered(
    table: TableClient,
    products: TableClient,
    servicebus_client: ServiceBusClient,
    session_runner: SessionRunner,
    session_queue: str,
) -> None:
    progress = TableImportProgress(table)
    catalog = TableProductCatalog(products)
    processor = SessionProcessor(
        pipeline=PRODUCT_IMPORT,
        tasks=import_tasks(catalog),
        policy=FailurePolicy.CONTINUE_ON_FAILURE,
        retry=RetryPolicy(window=0, min_backoff=0, max_backoff=0),
        sleep=lambda _: None,
        observer=import_progress_observer(progress),
    )
    rows = [
        {"sku": "A", "name": "Apple", "price": "1.00", "currency": "EUR"},
        {"sku": "B", "name": "Banana", "currency": "EUR"},  # no price
        {"sku": "C", "name": "Cherry", "price": "2.00", "currency": "EUR"},
    ]
    # One job in two sessions: message ids are job:row, as the import job sends them (job:step
    # would repeat across sessions, and duplicate detection would drop the second session).
    send_raw(
        servicebus_client,
        session_queue,
        [
            to_service_bus_message(
                session,
                import_message("job-1", step, is_last=step == 3, row=row),
                message_id=f"job-1:{3 * index + step}",
            )
            for index, session in enumerate(("job-1-0000", "job-1/0001"))
            for step, row in enumerate(rows, 1)
        ]
        + [
            ServiceBusMessage(
                b"not json",
                session_id="job-1-0002",
                application_properties={"job_id": "job-1", "step": 1},
            )
        ],
    )

    runs = {
        session: session_runner.run(
            session_queue, session, processor, wrap=DiesBeforeItsFirstCompletion()
        )
        for session in ("job-1-0000", "job-1/0001")
    }
    malformed = session_runner.run(session_queue, "job-1-0002", processor)

    for results in runs.values():
        assert isinstance(results[0], RuntimeError)  # then redelivered and found done
        assert outcomes(results[1:]) == [
            Outcome.ALREADY_DONE,
            Outcome.DEAD_LETTERED,
            Outcome.COMPLETED,
        ]
    assert outcomes(malformed) == [Outcome.DEAD_LETTERED]
    assert progress.counts("job-1") == {"imported": 4, "failed": 3}
    assert progress.counts("other") == {}
    assert sorted(catalog.find(["A", "B", "C"])) == ["A", "C"]


def test_a_jobs_rows_spread_over_a_partition_per_session_and_older_rows_still_count(
    table: TableClient,
) -> None:
    # Given rows written before the job's rows had a partition per session (PartitionKey = the
    # job), and rows of a job whose id starts with this one's
    for step, status in ((1, "imported"), (2, "failed")):
        table.upsert_entity(
            {"PartitionKey": "job", "RowKey": f"old~~{step:>09}", "status": status,
             "session_id": "old", "step": step}
        )  # fmt: skip
    progress = TableImportProgress(table)
    progress.record("job~", "s1", 1, status="imported", reason=None)

    # When rows of two sessions are recorded now
    for session in ("s1", "s2"):
        for step in (1, 2):
            progress.record("job", session, step, status="imported", reason=None)

    # Then each session's rows have a partition of their own
    partitions = {
        row["PartitionKey"] for row in table.list_entities() if row["session_id"] != "old"
    }
    assert partitions == {"job~~s1", "job~~s2", "job~7E~~s1"}
    # And the job's counts, whole and per session, take both layouts and no other job
    assert progress.counts("job") == {"imported": 5, "failed": 1}
    assert progress.counts("job", session_id="s2") == {"imported": 2}
    assert progress.counts("job", session_id="old") == {"imported": 1, "failed": 1}
    assert progress.counts("job~") == {"imported": 1}


def test_a_batch_of_outcomes_is_written_in_transactions_of_at_most_100_per_session(
    table: TableClient, azurite_connection_string: str
) -> None:
    # Given 250 outcomes of two sessions of one job (Azurite answers a transaction over 100
    # operations brokenly), one of them given twice, first failed then imported
    sent: list[Any] = []
    progress = TableImportProgress(
        TableServiceClient.from_connection_string(
            azurite_connection_string,
            raw_request_hook=lambda request: sent.append(request.http_request.method),
        ).get_table_client(table.table_name)
    )
    rows = [RowOutcome("job-b", "job-b-s1", step, "imported") for step in range(1, 201)]
    rows += [RowOutcome("job-b", "job-b-s2", step, "imported") for step in range(1, 50)]
    rows += [RowOutcome("job-b", "job-b-s2", 50, "failed", "InvalidProduct:price")]
    rows += [RowOutcome("job-b", "job-b-s2", 50, "imported")]

    # When they are recorded together
    progress.record_many(rows)

    # Then they took one request per 100 of a session, and every row counts once, with its
    # last outcome
    assert sent == ["POST"] * 3
    assert progress.counts("job-b") == {"imported": 250}
    assert progress.counts("job-b", session_id="job-b-s2") == {"imported": 50}


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_runs_and_rows_own_records_count_each_row_once(table: TableClient, case: Case) -> None:
    progress = TableImportProgress(table)

    record(progress, case)

    assert progress.counts(CASE_JOB) == case.counts
    assert progress.counts(CASE_JOB, session_id=SESSION) == case.session_counts


def test_a_batch_of_100_imported_rows_is_one_entity_written_in_one_request(
    table: TableClient, azurite_connection_string: str
) -> None:
    # Given the import's observer over the adapter, every request it sends recorded
    sent: list[str] = []
    progress = TableImportProgress(
        TableServiceClient.from_connection_string(
            azurite_connection_string,
            raw_request_hook=lambda request: sent.append(request.http_request.method),
        ).get_table_client(table.table_name)
    )
    observer = import_progress_observer(progress)

    # When a batch of 100 rows of a session imports
    observer.many([_told(step) for step in range(1, 101)])

    # Then one upsert wrote one entity for them, and they count 100
    assert sent == ["PUT"]
    [entity] = table.list_entities()
    assert (entity["first_step"], entity["last_step"], entity["status"]) == (1, 100, "imported")
    assert progress.counts(CASE_JOB) == {"imported": 100}

    # And when the batch is redelivered from the same row, shorter, its entity is replaced
    observer.many([_told(step) for step in range(1, 61)])
    [entity] = table.list_entities()
    assert entity["last_step"] == 60
    assert progress.counts(CASE_JOB) == {"imported": 60}


def test_a_runs_key_sorts_beside_its_first_rows_own_and_never_meets_it(table: TableClient) -> None:
    # Given a run from row 1 and rows 1 and 2 recorded on their own too (the batch ran again
    # one by one), and a session whose id ends in what a run's key adds
    progress = TableImportProgress(table)
    progress.record_run(CASE_JOB, SESSION, 1, 3)
    for step in (1, 2):
        progress.record(CASE_JOB, SESSION, step, status="imported", reason=None)
    progress.record(CASE_JOB, f"{SESSION}~run", 1, status="failed", reason=None)

    # Then each is an entity of its own, in its session's partition, the run after its first row
    keys = [(e["PartitionKey"], e["RowKey"]) for e in table.list_entities()]
    assert sorted(keys) == [
        ("job-r~~job-r-0000", "job-r-0000~~000000001"),
        ("job-r~~job-r-0000", "job-r-0000~~000000001~run"),
        ("job-r~~job-r-0000", "job-r-0000~~000000002"),
        ("job-r~~job-r-0000~7Erun", "job-r-0000~7Erun~~000000001"),
    ]
    assert progress.counts(CASE_JOB) == {"imported": 3, "failed": 1}


def test_runs_count_with_rows_of_the_legacy_layout_once_each(table: TableClient) -> None:
    # Given rows 1 and 2 of a session written under the job alone (the layout before), and one
    # of another session
    for session, step, status in (
        (SESSION, 1, "imported"),
        (SESSION, 2, "failed"),
        ("s9", 1, "imported"),
    ):
        table.upsert_entity(
            {"PartitionKey": CASE_JOB, "RowKey": f"{session}~~{step:>09}", "status": status,
             "session_id": session, "step": step}
        )  # fmt: skip
    progress = TableImportProgress(table)

    # When a run of the session's rows 1 to 5 is recorded in the layout of now
    progress.record_run(CASE_JOB, SESSION, 1, 5)

    # Then each row counts once, a row's own record winning over the run
    assert progress.counts(CASE_JOB) == {"imported": 5, "failed": 1}
    assert progress.counts(CASE_JOB, session_id=SESSION) == {"imported": 4, "failed": 1}
    assert progress.counts(CASE_JOB, session_id="s9") == {"imported": 1}


def _told(step: int) -> Told:
    message = import_message(CASE_JOB, step, is_last=False, row={"sku": f"SKU-{step}"})
    incoming = IncomingMessage(
        message.to_json(), SESSION, application_properties=message.application_properties()
    )
    return (incoming, message, Outcome.COMPLETED, None)


def _recorded_before_the_upgrade(
    table: TableClient, job: str, session: str, step: int, status: str
) -> None:
    """A row's outcome as the release before a partition per session wrote it."""
    table.upsert_entity(
        {"PartitionKey": job, "RowKey": f"{session}~~{step:>09}", "status": status,
         "session_id": session, "step": step}
    )  # fmt: skip


def test_a_row_recorded_before_the_upgrade_and_again_after_it_counts_once(
    table: TableClient,
) -> None:
    # Given a job of 3 rows in one session: before the upgrade row 1 was imported and row 2
    # failed; after it, row 2 was replayed and imported, and row 1 redelivered; row 3 never ran
    job, session = "job-u", "job-u-0000"
    _recorded_before_the_upgrade(table, job, session, 1, "imported")
    _recorded_before_the_upgrade(table, job, session, 2, "failed")
    progress = TableImportProgress(table)
    progress.record(job, session, 2, status="imported", reason=None)
    progress.record_many([RowOutcome(job, session, 1, "imported")])

    # When the job's status is read
    manifest = JobManifest(job, "product-import-tasks", 3, 0, 3, {session: 3})
    status = import_job_status(job, manifest, progress.counts(job))

    # Then each row counts once, with its latest outcome: row 3 is pending
    assert (status.rows_imported, status.rows_failed, status.rows_pending) == (2, 0, 1)
    assert status.status == "importing"
    assert progress.counts(job, session_id=session) == {"imported": 2}
