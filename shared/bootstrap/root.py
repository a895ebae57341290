"""The composition root's container: the app's parts, each built on first use, once per
container, under the container's lock (the worker runs functions on a thread pool), and reused
by every later invocation. Tests and the local host replace parts by name
(``Container(settings, archive=...)`` or ``container.override(archive=...)``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast, overload

from ..config import Settings
from ..service_layer.circuits import Gates
from ..service_layer.history import Progress
from ..service_layer.idempotency import IdempotentRequests
from ..service_layer.orders import OrderLookup
from ..service_layer.overview import Sources
from ..service_layer.pauses import PipelineControls
from ..service_layer.processor import SessionProcessor
from ..service_layer.receipt_mailer import ReceiptMailer
from ..service_layer.session_messages import Observer
from . import operator_parts
from . import parts as adapters
from .operator_desk import OperatorDesk
from .processors import Processors, pipeline_gates
from .wiring import AppPipelines

if TYPE_CHECKING:
    from azure.data.tables import TableClient, TableServiceClient
    from azure.servicebus import ServiceBusClient
    from azure.storage.blob import BlobServiceClient
    from azure.storage.queue import QueueServiceClient

    from ..adapters.servicebus_sender import SenderPool
    from ..adapters.table_transactions import TableTransactions
    from ..service_layer.operator_ports import (
        AuditTrail,
        Confirmations,
        DeadLetterCounter,
        PipelinePauses,
        RetentionStore,
        TimerRuns,
    )
    from ..service_layer.ports import (
        Archive,
        DeadLetterSource,
        EmailSender,
        IdempotencyRecords,
        ImportManifests,
        ImportProgress,
        MessageResender,
        OrderNumbers,
        OrderProgress,
        PaymentGateway,
        ProductCatalog,
        ReceiptEmails,
        ReceiptRenderer,
        ReceiptStore,
        ReplayQueue,
        ReplayRequestStore,
        SessionOutcomes,
        SessionSeeder,
        TaskSender,
    )

T = TypeVar("T")


class Part(Generic[T]):
    """A part of the container, built by ``build(container)`` on first use."""

    def __init__(self, build: Callable[[Container], T]) -> None:
        self._build = build
        self.name = build.__name__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, container: None, owner: type) -> Part[T]: ...
    @overload
    def __get__(self, container: Container, owner: type) -> T: ...
    def __get__(self, container: Container | None, owner: type) -> Part[T] | T:
        if container is None:
            return self
        return container.part(self.name, lambda: self._build(container))

    def __set__(self, container: Container, value: T) -> None:
        raise AttributeError(f"Replace a part with container.override({self.name}=...)")


class Container:
    """The app's parts, built lazily. Overrides replace parts by name (the ``Part``
    attributes below); an unknown name is refused, so a typo cannot leave a real part in."""

    def __init__(self, settings: Settings | None = None, **overrides: Any) -> None:
        self._lock = threading.RLock()  # re-entrant: building a part builds the parts it uses
        self._parts: dict[str, Any] = {}
        if settings is not None:
            self._parts["settings"] = settings
        self.override(**overrides)

    def override(self, **parts: Any) -> None:
        """Replace parts, built or not (a test swaps a port for a failing one mid-test)."""
        unknown = sorted(name for name in parts if not isinstance(vars(Container).get(name), Part))
        if unknown:
            raise AttributeError(f"Container has no part named {', '.join(unknown)}")
        with self._lock:
            self._parts.update(parts)

    def part(self, name: str, build: Callable[[], T]) -> T:
        with self._lock:
            if name not in self._parts:
                self._parts[name] = build()
            return cast(T, self._parts[name])

    def built(self, name: str) -> bool:
        with self._lock:
            return name in self._parts

    def has_part(self, name: str) -> bool:
        """Whether ``name`` is a part of the container (what a pipeline's builder may ask for)."""
        return isinstance(vars(Container).get(name), Part) and not name.startswith("_")

    def get_part(self, name: str) -> Any:
        if not self.has_part(name):
            raise AttributeError(f"Container has no part named {name}")
        return getattr(self, name)

    def table(self, name: str) -> TableClient:
        """A client of the table ``name`` (a pipeline's own adapter's)."""
        return self._table_service.get_table_client(name)

    @property
    def session_queues(self) -> tuple[str, ...]:
        """Every declared pipeline's session queue."""
        return tuple(self.settings.queues.values())

    @property
    def queue_observers(self) -> dict[str, Observer]:
        """Each declared pipeline's observer, by its session queue: what the archive tells of
        the messages Service Bus dead-lettered itself."""
        observers = ((w.pipeline.name, w.observer(self)) for w in self.pipelines.wired)
        return {self.settings.queue_of(name): o for name, o in observers if o is not None}

    def processor(self, pipeline: str) -> SessionProcessor:
        """The session processor of a declared pipeline (``processors``)."""
        return self.processors[pipeline]

    @property
    def operator_desk(self) -> OperatorDesk:
        """What the console and the API's operator routes act with, over the current parts
        (so an override made after an earlier request still takes effect)."""
        return OperatorDesk(
            self.archive,
            self.resender,
            self.session_seeder,
            self.audit_trail,
            self.idempotent_requests,
            self.confirmations,
            self.replay_requests,
            self.replay_queue,
            self.pipelines.declared,
        )

    # The pipelines the app runs, wired (``app_pipelines``): what everything else is handed.
    pipelines: Part[AppPipelines] = Part(lambda c: _app_pipelines())
    settings: Part[Settings] = Part(lambda c: Settings.from_env(pipelines=c.pipelines.declared))
    # Each declared pipeline's pause and circuit in this process, by the pipeline's name.
    gates: Part[Gates] = Part(lambda c: pipeline_gates(c))
    pipeline_controls: Part[PipelineControls] = Part(
        lambda c: PipelineControls(
            dict(c.settings.queues), c.pipeline_pauses, c.gates, c.audit_trail
        )
    )
    # One processor per declared pipeline, by the pipeline's name, each built on its first use.
    processors: Part[Mapping[str, SessionProcessor]] = Part(lambda c: Processors(c))
    idempotent_requests: Part[IdempotentRequests] = Part(
        lambda c: IdempotentRequests(c.idempotency_records)
    )
    # What the operator's overview and a session's history read.
    overview_sources: Part[Sources] = Part(
        lambda c: Sources(
            c.archive,
            c.dead_letter_counter,
            c.order_progress,
            c.import_manifests,
            c.import_progress,
            runs=c.timer_runs,
            rules=c.settings.alerts,
            sessions=c.session_outcomes,
        )
    )
    replay_progress: Part[Progress] = Part(lambda c: Progress(c.session_outcomes))
    order_lookup: Part[OrderLookup] = Part(
        lambda c: OrderLookup(
            c.order_progress,
            c.order_numbers,
            c.payments,
            c.archive,
            c.audit_trail,
            c.session_outcomes,
            c.receipt_emails,
        )
    )
    # Adapters, each built by ``shared.bootstrap.parts`` from the clients below.
    catalog: Part[ProductCatalog] = Part(
        lambda c: adapters.catalog(c._table_service, c._table_transactions)
    )
    order_numbers: Part[OrderNumbers] = Part(
        lambda c: adapters.order_numbers(c._table_service, c.settings)
    )
    payments: Part[PaymentGateway] = Part(lambda c: adapters.payments(c._table_service, c.settings))
    task_sender: Part[TaskSender] = Part(lambda c: adapters.task_sender(c._service_bus, c._senders))
    order_progress: Part[OrderProgress] = Part(lambda c: adapters.order_progress(c._table_service))
    idempotency_records: Part[IdempotencyRecords] = Part(
        lambda c: adapters.idempotency_records(c._table_service)
    )
    import_progress: Part[ImportProgress] = Part(
        lambda c: adapters.import_progress(c._table_service)
    )
    session_outcomes: Part[SessionOutcomes] = Part(
        lambda c: adapters.session_outcomes(c._table_service)
    )
    import_manifests: Part[ImportManifests] = Part(
        lambda c: adapters.import_manifests(c._table_service)
    )
    archive: Part[Archive] = Part(
        lambda c: adapters.archive(c._table_service, c._blob_service, c._table_transactions)
    )
    dead_letter_source: Part[DeadLetterSource] = Part(
        lambda c: adapters.dead_letter_source(c._service_bus, c.settings)
    )
    resender: Part[MessageResender] = Part(lambda c: adapters.resender(c._service_bus, c._senders))
    session_seeder: Part[SessionSeeder] = Part(lambda c: adapters.session_seeder(c._service_bus))
    replay_requests: Part[ReplayRequestStore] = Part(
        lambda c: adapters.replay_requests(c._table_service)
    )
    replay_queue: Part[ReplayQueue] = Part(
        lambda c: adapters.replay_queue(c._queue_service, c.settings.replay_queue_name)
    )
    receipts: Part[ReceiptStore] = Part(lambda c: adapters.receipts(c._blob_service))
    receipt_renderer: Part[ReceiptRenderer] = Part(lambda c: adapters.receipt_renderer())
    email: Part[EmailSender] = Part(lambda c: adapters.email(c.settings))
    receipt_emails: Part[ReceiptEmails] = Part(lambda c: adapters.receipt_emails(c._table_service))
    receipt_mailer: Part[ReceiptMailer] = Part(
        lambda c: ReceiptMailer(c.receipt_emails, c.email, after_send=_fault_hold(c.settings))
    )
    # The operator console's records and the dead letters it counts.
    audit_trail: Part[AuditTrail] = Part(lambda c: operator_parts.audit_trail(c._table_service))
    confirmations: Part[Confirmations] = Part(
        lambda c: operator_parts.confirmations(c._table_service)
    )
    dead_letter_counter: Part[DeadLetterCounter] = Part(
        lambda c: operator_parts.dead_letter_counter(c._service_bus)
    )
    pipeline_pauses: Part[PipelinePauses] = Part(
        lambda c: operator_parts.pipeline_pauses(c._table_service)
    )
    # What the timers' runs left behind (the overview's alerts), and the purge's deletes.
    timer_runs: Part[TimerRuns] = Part(lambda c: operator_parts.timer_runs(c._table_service))
    retention: Part[RetentionStore] = Part(
        lambda c: operator_parts.retention(
            c._table_service, c._blob_service, c.pipelines.declared.tables
        )
    )
    # Clients, one of each per container.
    _service_bus: Part[ServiceBusClient] = Part(
        lambda c: adapters.service_bus_client(c.settings.service_bus)
    )
    _senders: Part[SenderPool] = Part(lambda c: adapters.sender_pool(c._service_bus))
    _table_service: Part[TableServiceClient] = Part(
        lambda c: adapters.table_service(c.settings.storage)
    )
    _table_transactions: Part[TableTransactions | None] = Part(
        lambda c: adapters.table_transactions(c.settings.storage, c._table_service)
    )
    _blob_service: Part[BlobServiceClient] = Part(
        lambda c: adapters.blob_service(c.settings.storage)
    )
    _queue_service: Part[QueueServiceClient] = Part(
        lambda c: adapters.queue_service(c.settings.storage)
    )


def _app_pipelines() -> AppPipelines:
    from .declared import app_pipelines  # imports every pipeline's tasks: on first use

    return app_pipelines()


def _fault_hold(settings: Settings) -> Callable[[str], None] | None:
    if not settings.fault_hold_after_receipt_sent:
        return None
    from .faults import hold_after_receipt_sent

    return hold_after_receipt_sent(settings.fault_hold_after_receipt_sent)
