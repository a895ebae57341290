"""Real azure.functions and azure.servicebus objects, a real in-process gRPC Settlement server
standing in for the Functions host, and in-memory twins behind the services."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from concurrent import futures
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest
from azure.servicebus import ServiceBusReceivedMessage
from azure.servicebus._pyamqp.message import Header, Message, Properties
from azure.storage.queue import QueueClient
from azurefunctions.extensions.bindings.protos import settlement_pb2, settlement_pb2_grpc
from azurefunctions.extensions.bindings.servicebus import ServiceBusMessageActions
from google.protobuf.empty_pb2 import Empty
from google.protobuf.timestamp_pb2 import Timestamp

from shared.adapters.servicebus_bindings import settlement_actions
from shared.bootstrap import Container, use_container
from shared.config import StorageConnectionSettings
from shared.domain.errors import PermanentTaskError, TransientTaskError
from shared.domain.pipelines import PRODUCT_IMPORT, PURCHASE
from shared.service_layer.processor import (
    FailurePolicy,
    RetryPolicy,
    SessionProcessor,
    TaskInvocation,
)
from tests.builders import APP_SETTINGS, app_settings
from tests.fakes import (
    FakeTime,
    InMemoryDeadLetterCounter,
    InMemoryDeadLetterQueue,
    InMemoryIdempotencyRecords,
    InMemoryImportManifests,
    InMemoryImportProgress,
    InMemoryOrderNumbers,
    InMemoryOrderProgress,
    InMemoryResender,
    InMemorySessionOutcomes,
    InMemorySessionSeeder,
    InMemoryTaskSender,
)

# How long a renewal locks the session for, as a queue's LockDuration says.
LOCK_SECONDS = 60


def host_route_value(value: str) -> str:
    """A route value as the Functions host hands it over: a client percent-encodes the id and
    the host decodes every escape but %2F (as ASP.NET Core does)."""
    return value.replace("/", "%2F")


@dataclass
class RecordingSettlement(settlement_pb2_grpc.SettlementServicer):
    """The host's Settlement service: records each call and keeps session state by id."""

    calls: list[tuple[str, Any]] = field(default_factory=list)
    states: dict[str, bytes] = field(default_factory=dict)
    # Operations that fail once each (as a host that lost the lock would), e.g. {"complete"}.
    fail_once: set[str] = field(default_factory=set)
    # Operations that fail until the test takes them out (the message's lock is lost).
    lost: set[str] = field(default_factory=set)

    def Complete(self, request: Any, context: Any) -> Empty:
        if "complete" in self.lost:
            context.abort(grpc.StatusCode.ABORTED, "SessionLockLostError: the lock expired")
        if "complete" in self.fail_once:
            self.fail_once.discard("complete")
            context.abort(grpc.StatusCode.ABORTED, "MessageLockLostError: the worker died")
        self.calls.append(("complete", request.locktoken))
        return Empty()

    def Abandon(self, request: Any, context: Any) -> Empty:
        self.calls.append(("abandon", request.locktoken))
        return Empty()

    def Deadletter(self, request: Any, context: Any) -> Empty:
        reason = request.deadletterReason.value
        description = request.deadletterErrorDescription.value
        self.calls.append(("deadletter", (request.locktoken, reason, description)))
        return Empty()

    def GetSessionState(self, request: Any, context: Any) -> Any:
        self.calls.append(("get_session_state", request.sessionId))
        return settlement_pb2.GetSessionStateResponse(
            sessionState=self.states.get(request.sessionId, b"")
        )

    def SetSessionState(self, request: Any, context: Any) -> Empty:
        self.calls.append(("set_session_state", (request.sessionId, request.sessionState)))
        if request.sessionState:
            self.states[request.sessionId] = request.sessionState
        else:
            self.states.pop(request.sessionId, None)
        return Empty()

    def ReleaseSession(self, request: Any, context: Any) -> Empty:
        self.calls.append(("release_session", request.sessionId))
        return Empty()

    def RenewSessionLock(self, request: Any, context: Any) -> Any:
        if "renew_session_lock" in self.fail_once:
            self.fail_once.discard("renew_session_lock")
            context.abort(grpc.StatusCode.ABORTED, "SessionLockLostError: the lock expired")
        self.calls.append(("renew_session_lock", request.sessionId))
        locked_until = Timestamp()
        locked_until.FromDatetime(datetime.now(UTC) + timedelta(seconds=LOCK_SECONDS))
        return settlement_pb2.RenewSessionLockResponse(lockedUntil=locked_until)

    def releases(self) -> list[str]:
        return [session for call, session in self.calls if call == "release_session"]

    def settlements(self) -> list[tuple[str, Any]]:
        return [c for c in self.calls if c[0] in ("complete", "abandon", "deadletter")]


@pytest.fixture(scope="session")
def settlement_server() -> Iterator[tuple[RecordingSettlement, str]]:
    servicer = RecordingSettlement()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    settlement_pb2_grpc.add_SettlementServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, f"127.0.0.1:{port}"
    server.stop(grace=None)


@pytest.fixture
def settlement(
    settlement_server: tuple[RecordingSettlement, str],
) -> Iterator[RecordingSettlement]:
    servicer, _ = settlement_server
    servicer.calls.clear()
    servicer.states.clear()
    servicer.fail_once.clear()
    servicer.lost.clear()
    yield servicer


@pytest.fixture
def message_actions(
    settlement_server: tuple[RecordingSettlement, str],
) -> Iterator[ServiceBusMessageActions]:
    """The extension's own class, its stub pointed at the in-process server (its __init__
    reads the worker's command line for the host's address, which a test does not have; the
    adapter that owns the package's internals builds it)."""
    _, address = settlement_server
    channel = grpc.insecure_channel(address)
    yield settlement_actions(channel, address)
    channel.close()


def received_message(
    body: bytes,
    *,
    session_id: str,
    delivery_count: int | None = 0,
    message_id: str = "message-1",
    application_properties: Mapping[Any, Any] | None = None,
) -> ServiceBusReceivedMessage:
    """A message as the extension builds it: an AMQP message with the lock token in its
    delivery annotations, wrapped without a receiver. ``delivery_count=None``: no AMQP header,
    as the extension's converter rebuilds the message in Azure (its delivery count is None)."""
    amqp = Message(
        data=[body],
        header=Header(delivery_count=delivery_count) if delivery_count is not None else None,
        properties=Properties(message_id=message_id.encode(), group_id=session_id.encode()),
        application_properties=dict(application_properties or {}),
        delivery_annotations={b"x-opt-lock-token": uuid.uuid4()},
    )
    return ServiceBusReceivedMessage(amqp, receiver=None)


def _ok(invocation: TaskInvocation) -> Mapping[str, Any]:
    return {f"{invocation.message.task}_done": True}


def _declined(invocation: TaskInvocation) -> Mapping[str, Any]:
    raise PermanentTaskError("PaymentDeclined", "The card was declined: ask for another card.")


def _provider_down(invocation: TaskInvocation) -> Mapping[str, Any]:
    raise TransientTaskError(
        "PaymentProviderUnavailable", "The provider timed out.", dependency="the payment provider"
    )


@dataclass
class Twins:
    container: Container
    sender: InMemoryTaskSender
    idempotency: InMemoryIdempotencyRecords
    orders: InMemoryOrderProgress
    time: FakeTime


@pytest.fixture
def twins() -> Iterator[Twins]:
    """A container whose processors run small in-memory tasks and whose sender records. Their
    time is a ``FakeTime``; a transient failure's 1 s backoff is longer than the half second
    an invocation may hold its session, so the message is handed back at once, and given up
    1 s after its first failure."""
    retry = RetryPolicy(window=1, min_backoff=1, max_backoff=1)
    time = FakeTime(datetime(2026, 11, 27, tzinfo=UTC))
    twins = Twins(
        Container(app_settings(APP_SETTINGS)),
        InMemoryTaskSender(),
        InMemoryIdempotencyRecords(),
        InMemoryOrderProgress(),
        time,
    )
    twins.container.override(
        processors={
            PURCHASE: SessionProcessor(
                pipeline=PURCHASE,
                tasks={"First": _ok, "Second": _ok, "Declined": _declined, "Flaky": _provider_down},
                policy=FailurePolicy.STOP_ON_FAILURE,
                retry=retry,
                hold_seconds=0.5,
                sleep=time.sleep,
                clock=time.now,
                monotonic=time.monotonic,
            ),
            PRODUCT_IMPORT: SessionProcessor(
                pipeline=PRODUCT_IMPORT,
                tasks={"ImportProduct": _ok},
                policy=FailurePolicy.CONTINUE_ON_FAILURE,
                retry=retry,
                hold_seconds=0.5,
                sleep=time.sleep,
                clock=time.now,
                monotonic=time.monotonic,
            ),
        },
        task_sender=twins.sender,
        idempotency_records=twins.idempotency,
        order_progress=twins.orders,
    )
    use_container(twins.container)
    yield twins
    use_container(None)


# -- real storage for the bindings that read and write it ----------------------------------------


@dataclass
class StorageApp:
    """The app's container on a real Azurite, each table, container and queue fresh for one
    test. The Service Bus ports (dead-letter sub-queues, resender, seeder) start as in-memory
    twins, for the error paths a binding must map; test_dead_letters_servicebus.py puts them
    on the project's emulator."""

    container: Container
    dead_letters: InMemoryDeadLetterQueue
    resender: InMemoryResender
    seeder: InMemorySessionSeeder
    replay_queue: QueueClient


@pytest.fixture
def storage_app(azurite_connection_string: str) -> Iterator[StorageApp]:
    from shared.adapters.azure_clients import blob_service, queue_service, table_service
    from shared.adapters.storage_replay_queue import StorageQueueReplayQueue, replay_queue_client
    from shared.adapters.table_archive import TableDeadLetterArchive
    from shared.adapters.table_audit import TableAuditTrail
    from shared.adapters.table_confirmations import TableConfirmations
    from shared.adapters.table_idempotency import TableIdempotencyRecords
    from shared.adapters.table_pipeline_pauses import TablePipelinePauses
    from shared.adapters.table_replay_requests import TableReplayRequests
    from shared.adapters.table_timer_runs import TableTimerRuns

    storage = StorageConnectionSettings(connection_string=azurite_connection_string)
    tables, blobs, queues = table_service(storage), blob_service(storage), queue_service(storage)
    suffix = uuid.uuid4().hex[:12]
    names = [
        f"deadletters{suffix}",
        f"failedsessions{suffix}",
        f"replayrequests{suffix}",
        f"idempotencykeys{suffix}",
        f"operatoraudit{suffix}",
        f"confirmations{suffix}",
        f"pipelinepauses{suffix}",
        f"timerruns{suffix}",
    ]
    rows, sessions, requests, keys, audit, tokens, pauses, runs = (
        tables.create_table(n) for n in names
    )
    bodies = blobs.create_container(f"bodies-{suffix}")
    queue = replay_queue_client(queues.create_queue(f"replays-{suffix}"))

    c = Container(app_settings({**APP_SETTINGS, "AzureWebJobsStorage": azurite_connection_string}))
    app = StorageApp(
        container=c,
        dead_letters=InMemoryDeadLetterQueue(),
        resender=InMemoryResender(),
        seeder=InMemorySessionSeeder(),
        replay_queue=queue,
    )
    c.override(
        archive=TableDeadLetterArchive(rows, sessions, bodies),
        replay_requests=TableReplayRequests(requests),
        replay_queue=StorageQueueReplayQueue(queue),
        idempotency_records=TableIdempotencyRecords(keys),
        audit_trail=TableAuditTrail(audit),
        confirmations=TableConfirmations(tokens),
        pipeline_pauses=TablePipelinePauses(pauses),
        timer_runs=TableTimerRuns(runs),
        order_progress=InMemoryOrderProgress(),
        session_outcomes=InMemorySessionOutcomes(),
        import_progress=InMemoryImportProgress(),
        import_manifests=InMemoryImportManifests(),
        order_numbers=InMemoryOrderNumbers(),
        dead_letter_counter=InMemoryDeadLetterCounter(),
        dead_letter_source=app.dead_letters,
        resender=app.resender,
        session_seeder=app.seeder,
    )
    use_container(c)
    try:
        yield app
    finally:
        use_container(None)
        for name in names:
            tables.delete_table(name)
        bodies.delete_container()
        queue.delete_queue()
