"""The session state, messages and derived ids the app writes: the state document with every
field set, the states the processor leaves running the real tasks over in-memory twins,
messages and ids by the functions that make them, a replay's from an archive on Azurite.

A task's transient failures are not run here: how the processor waits them out is its own;
the fields they leave in the state are in the document with every field set."""

from __future__ import annotations

import base64
import dataclasses
import json
import types
import typing
from collections.abc import Iterable
from decimal import Decimal
from typing import Any, TypeVar

from shared.adapters.servicebus_sender import to_service_bus_message
from shared.adapters.storage_replay_queue import StorageQueueReplayQueue, replay_queue_client
from shared.bootstrap import app_pipelines
from shared.domain.archive import replay_session_id
from shared.domain.envelope import TaskMessage
from shared.domain.payments import payment_idempotency_key
from shared.domain.pipelines import PRODUCT_IMPORT, PURCHASE, FailurePolicy, import_message
from shared.domain.products import Product
from shared.domain.session_state import SessionState
from shared.service_layer.jobs import job_ids
from shared.service_layer.processor import RetryPolicy, SessionProcessor
from shared.service_layer.product_import_tasks import import_tasks
from shared.service_layer.purchase_tasks import PurchaseDependencies, purchase_tasks
from shared.service_layer.receipt_mailer import ReceiptMailer
from shared.service_layer.replay import replay_session
from shared.service_layer.session_messages import IncomingMessage, Outcome
from spark_jobs.product_import.sending import message_id as import_message_id
from tests.builders import PIPELINES
from tests.fakes import (
    InMemoryEmailSender,
    InMemoryOrderNumbers,
    InMemoryPaymentGateway,
    InMemoryProductCatalog,
    InMemoryReceiptEmails,
    InMemoryReceiptRenderer,
    InMemoryReceiptStore,
    InMemoryResender,
    InMemorySessionActions,
    InMemorySessionSeeder,
)

from .shape_structures import Storage, structure_of
from .shapes_tables import JOB, KEY, ORDER, failed_purchase_archive, order_messages, sample_time

T = TypeVar("T")


def session_state(storage: Storage) -> object:
    """The state document with every field it has set (a failure, a skipped row, a step's
    failed attempts): whatever fields the processor writes, however it comes to write them."""
    return structure_of(filled(SessionState).to_bytes())


def purchase_state(storage: Storage) -> object:
    """The states a purchase's tasks leave, completed and declined: its context's keys."""
    written: list[bytes] = []
    for card in ("tok_visa", "tok_declined"):
        written += _run(_purchase_processor(InMemoryEmailSender()), order_messages(card))
    return sorted({json.dumps(structure_of(state), sort_keys=True) for state in written})


def import_state(storage: Storage) -> object:
    processor = SessionProcessor(
        pipeline=PRODUCT_IMPORT,
        tasks=import_tasks(InMemoryProductCatalog([])),
        policy=FailurePolicy.CONTINUE_ON_FAILURE,
        retry=RetryPolicy(window=0),
    )
    rows: list[dict[str, Any]] = [
        {"sku": "TEA-1", "name": "Tea", "price": "4.20", "currency": "EUR"},
        {"sku": "BAD", "name": "Bad", "price": None, "currency": "EUR"},
        {"sku": "MUG-1", "name": "Mug", "price": "8.50", "currency": "EUR"},
    ]
    messages = [import_message(JOB, n, is_last=False, row=r) for n, r in enumerate(rows, 1)]
    return sorted({json.dumps(structure_of(s), sort_keys=True) for s in _run(processor, messages)})


def task_messages(storage: Storage) -> object:
    purchase = PIPELINES.get(PURCHASE)
    sent = [to_service_bus_message(JOB, m) for m in purchase.messages(JOB, ORDER.to_payload())]
    row = {"sku": "TEA-1", "name": "Tea", "price": "4.20", "currency": "EUR", "description": ""}
    imported = to_service_bus_message(
        f"{JOB}-0000", import_message(JOB, 1, is_last=True, row=row),
        message_id=import_message_id(JOB, 17),
    )  # fmt: skip
    return [_message(m) for m in [*sent, imported]]


def replayed_messages(storage: Storage) -> object:
    """What a replay sends: the archived messages as they were, under a new session seeded
    with the failed session's context."""
    archive, _, _ = failed_purchase_archive(storage)
    resender, seeder = InMemoryResender(), InMemorySessionSeeder()
    replay_session(archive, resender, seeder, JOB, KEY, clock=sample_time, pipelines=PIPELINES)
    return {
        "messages": [_message(to_service_bus_message(s, m)) for _, s, m in resender.sent],
        "seeded state": [structure_of(state) for state in seeder.states.values()],
    }


def replay_queue_messages(storage: Storage) -> object:
    queue = storage.queue()
    StorageQueueReplayQueue(replay_queue_client(queue)).enqueue(
        "8d9f2c61-0f1b-4c4e-9f55-2b9f4b1c7a10"
    )
    # As the queue holds it: the queue trigger decodes base64 (its default encoding)
    return [structure_of(base64.b64decode(m.content)) for m in queue.receive_messages()]


def derived_ids(storage: Storage) -> object:
    onboarding = app_pipelines({"PIPELINE_MODULES": "tests.examples.onboarding"}).declared.get(
        "onboarding"
    )
    return {
        "purchase job ids": list(job_ids(PIPELINES.get(PURCHASE), KEY)),
        "pipeline job ids": list(job_ids(onboarding, KEY)),
        "replay session id": replay_session_id(JOB, KEY),
        "payment key": payment_idempotency_key(JOB),
        "import message id": import_message_id(JOB, 17),
        "task message id": TaskMessage(
            JOB, PURCHASE, "GenerateOrderNumber", 1, False, {}
        ).message_id(),
        "receipt Message-ID": _receipt_message_id(),
    }


def _purchase_processor(email: InMemoryEmailSender) -> SessionProcessor:
    """The purchase's real tasks over in-memory twins (a declined and an outage card)."""
    deps = PurchaseDependencies(
        order_numbers=InMemoryOrderNumbers(),
        catalog=InMemoryProductCatalog([Product("TEA-1", "Tea", Decimal("4.20"), "EUR")]),
        payments=InMemoryPaymentGateway(decline_tokens={"tok_declined"}),
        receipts=InMemoryReceiptStore(),
        renderer=InMemoryReceiptRenderer(),
        mailer=ReceiptMailer(InMemoryReceiptEmails(), email),
        tax_rate=Decimal("0.25"),
        shipping_fee=Decimal("4.95"),
    )
    return SessionProcessor(
        pipeline=PURCHASE,
        tasks=purchase_tasks(deps),
        policy=FailurePolicy.STOP_ON_FAILURE,
        retry=RetryPolicy(window=0),  # an outage card fails at once
    )


def _run(processor: SessionProcessor, messages: Iterable[TaskMessage]) -> list[bytes]:
    """Each message handled until it is not abandoned; the states written, as written."""
    actions = InMemorySessionActions()
    for message in messages:
        incoming = IncomingMessage(
            message.to_json(), JOB, application_properties=message.application_properties()
        )
        while processor.handle(incoming, actions).outcome is Outcome.ABANDONED:
            pass
    return [state for state in actions.state_writes if state]


def _message(message: Any) -> object:
    return {
        "session_id": message.session_id,
        "message_id": message.message_id,
        "content_type": message.content_type,
        "application_properties": structure_of(
            {str(k): v for k, v in (message.application_properties or {}).items()}
        ),
        "body": structure_of(b"".join(message.body)),  # the SDK yields a body's sections
    }


def _receipt_message_id() -> str:
    email = InMemoryEmailSender()
    _run(_purchase_processor(email), order_messages())
    return str(email.sent[0].message_id)


def filled(cls: type[T]) -> T:
    """An instance of the dataclass ``cls`` with every field set, from its type hints (a
    nested dataclass filled in turn)."""
    hints = typing.get_type_hints(cls)
    return cls(**{f.name: _sample(hints[f.name]) for f in dataclasses.fields(cls)})  # type: ignore[arg-type]


def _sample(hint: Any) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _sample(next(arg for arg in args if arg is not type(None)))
    if origin is typing.Literal:
        return args[0]
    if origin is tuple:
        return (_sample(args[0]),)
    if origin is dict:
        return {"key": "value"}
    if dataclasses.is_dataclass(hint):
        return filled(hint)  # type: ignore[arg-type]
    return {str: "x", int: 1, float: 1.5, bool: True}.get(hint, "x")
