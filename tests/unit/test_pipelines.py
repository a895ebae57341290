"""The purchase and import pipelines end to end through the processor, with in-memory twins."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from shared.domain.errors import InvalidInput
from shared.domain.orders import parse_order
from shared.domain.pipelines import PRODUCT_IMPORT, PURCHASE, import_message, purchase_messages
from shared.domain.products import Product
from shared.domain.session_state import decode_session_state
from shared.service_layer.jobs import StartedJob, start_job
from shared.service_layer.processor import (
    FailurePolicy,
    IncomingMessage,
    Outcome,
    RetryPolicy,
    SessionProcessor,
)
from shared.service_layer.product_import_tasks import import_tasks
from shared.service_layer.purchase_tasks import PurchaseDependencies, purchase_tasks
from shared.service_layer.receipt_mailer import ReceiptMailer
from tests.builders import PIPELINES, order_document
from tests.fakes import (
    FakeTime,
    InMemoryEmailSender,
    InMemoryOrderNumbers,
    InMemoryPaymentGateway,
    InMemoryProductCatalog,
    InMemoryReceiptEmails,
    InMemoryReceiptRenderer,
    InMemoryReceiptStore,
    InMemorySessionActions,
    InMemoryTaskSender,
)

ORDER = order_document(
    customer_name="Ada Lovelace",
    lines=[{"sku": "MUG", "quantity": 2}, {"sku": "TEA", "quantity": 1}],
)


@dataclass
class Shop:
    order_numbers: InMemoryOrderNumbers = field(default_factory=InMemoryOrderNumbers)
    catalog: InMemoryProductCatalog = field(
        default_factory=lambda: InMemoryProductCatalog(
            [
                Product("MUG", "Mug", Decimal("8.50"), "EUR"),
                Product("TEA", "Tea", Decimal("3.00"), "EUR"),
            ]
        )
    )
    payments: InMemoryPaymentGateway = field(
        default_factory=lambda: InMemoryPaymentGateway(
            decline_tokens={"tok_declined"}, outage_tokens={"tok_outage"}
        )
    )
    receipts: InMemoryReceiptStore = field(default_factory=InMemoryReceiptStore)
    renderer: InMemoryReceiptRenderer = field(default_factory=InMemoryReceiptRenderer)
    email: InMemoryEmailSender = field(default_factory=InMemoryEmailSender)
    receipt_emails: InMemoryReceiptEmails = field(default_factory=InMemoryReceiptEmails)
    time: FakeTime = field(default_factory=lambda: FakeTime(datetime(2026, 11, 27, tzinfo=UTC)))

    def processor(self) -> SessionProcessor:
        deps = PurchaseDependencies(
            order_numbers=self.order_numbers,
            catalog=self.catalog,
            payments=self.payments,
            receipts=self.receipts,
            renderer=self.renderer,
            mailer=ReceiptMailer(self.receipt_emails, self.email),
            tax_rate=Decimal("0.25"),
            shipping_fee=Decimal("4.95"),
        )
        return SessionProcessor(
            pipeline=PURCHASE,
            tasks=purchase_tasks(deps),
            policy=FailurePolicy.STOP_ON_FAILURE,
            retry=RetryPolicy(window=60, min_backoff=1, max_backoff=30),
            sleep=self.time.sleep,
            clock=self.time.now,
            monotonic=self.time.monotonic,
        )


def run_session(processor, messages, actions, *, attempts_per_message=1):
    """Deliver the messages in order, redelivering each abandoned one, without a delivery
    count (as Azure's Python binding hands messages over): the processor counts attempts."""
    results = []
    for msg in messages:
        while True:
            incoming = IncomingMessage(
                body=msg.to_json(),
                session_id="s",
                application_properties=msg.application_properties(),
            )
            result = processor.handle(incoming, actions)
            if result.outcome is not Outcome.ABANDONED:
                results.append(result)
                break
    return results


def test_a_purchase_runs_its_five_tasks_in_order_and_clears_the_state() -> None:
    shop = Shop()
    actions = InMemorySessionActions()

    run_session(shop.processor(), purchase_messages("job-1", parse_order(ORDER)), actions)

    assert actions.settlements == [("complete",)] * 5
    assert actions.state is None
    [(key, charge)] = shop.payments.charges.items()
    assert key == "job-1:payment"
    assert charge.amount == Decimal("29.95")  # 20.00 + 25% + 4.95
    [receipt] = shop.renderer.rendered
    assert (receipt.order_number, receipt.total, receipt.charge_id) == (
        "ORD-00000001",
        Decimal("29.95"),
        charge.charge_id,
    )
    assert [line.name for line in receipt.lines] == ["Mug", "Tea"]
    [email] = shop.email.sent
    assert email.to == "ada@example.com"
    assert "ORD-00000001" in email.subject
    assert email.attachments[0].content == shop.receipts.receipts["ORD-00000001"]


def test_a_declined_card_stops_the_purchase_before_receipt_and_email() -> None:
    shop = Shop()
    actions = InMemorySessionActions()
    order = parse_order({**ORDER, "card_token": "tok_declined"})

    run_session(shop.processor(), purchase_messages("job-2", order), actions)

    assert [s[:2] for s in actions.settlements] == [
        ("complete",),
        ("complete",),
        ("dead_letter", "PaymentDeclined"),
        ("dead_letter", "SessionFailed"),
        ("dead_letter", "SessionFailed"),
    ]
    assert "ProcessPayment" in actions.settlements[3][2]
    assert shop.renderer.rendered == [] and shop.email.sent == []
    assert actions.state is None


def test_a_payment_outage_is_retried_with_backoff_then_fails_the_session() -> None:
    shop = Shop()
    actions = InMemorySessionActions()
    order = parse_order({**ORDER, "card_token": "tok_outage"})

    run_session(shop.processor(), purchase_messages("job-3", order), actions)

    # tried at 0, 1, 3, 7, 15, 31 and 61 s (the backoff capped at 30 s), all in one
    # invocation holding the session; given up once the 60 s window had passed
    assert shop.payments.calls == 7
    assert "abandon" not in [s[0] for s in actions.settlements]
    final = actions.settlements
    assert final[2][:2] == ("dead_letter", "PaymentProviderUnavailable")
    assert "Gave up: the payment provider was out of reach for 61 s" in final[2][2]
    assert [s[1] for s in final[3:]] == ["SessionFailed", "SessionFailed"]
    assert shop.payments.charges == {}


def test_an_outage_that_ends_within_the_window_lets_the_purchase_finish() -> None:
    shop = Shop()
    actions = InMemorySessionActions()
    order = parse_order({**ORDER, "card_token": "tok_outage"})
    # the provider is back 20 s into the outage

    def provider_back(time: FakeTime) -> None:
        if time.elapsed >= 20:
            shop.payments.outage_tokens.clear()

    shop.time.after_sleep.append(provider_back)

    run_session(shop.processor(), purchase_messages("job-4", order), actions)

    assert actions.settlements == [("complete",)] * 5
    assert len(shop.payments.charges) == 1
    assert actions.state is None and len(shop.email.sent) == 1


def test_an_unknown_sku_fails_at_calculate_total_and_says_what_to_do() -> None:
    shop = Shop()
    actions = InMemorySessionActions()
    order = parse_order({**ORDER, "lines": [{"sku": "NOPE", "quantity": 1}]})

    run_session(shop.processor(), purchase_messages("job-5", order), actions)

    kind, reason, description = actions.settlements[1]
    assert (kind, reason) == ("dead_letter", "UnknownSku")
    assert "NOPE" in description and "replay" in description
    assert shop.payments.calls == 0


def test_a_redelivered_process_payment_charges_the_card_once() -> None:
    shop = Shop()
    actions = InMemorySessionActions()
    processor = shop.processor()
    messages = purchase_messages("job-6", parse_order(ORDER))
    run_session(processor, messages[:2], actions)
    state_before_payment = actions.state
    payment = IncomingMessage(body=messages[2].to_json(), session_id="s")

    # 1. The worker charged, then died before writing the state: the lock expires and the
    #    message comes back with the state as it was.
    processor.handle(payment, actions)
    actions.state = state_before_payment
    processor.handle(IncomingMessage(body=messages[2].to_json(), session_id="s"), actions)
    # 2. It wrote the state, then died before completing: the redelivery is skipped.
    processor.handle(IncomingMessage(body=messages[2].to_json(), session_id="s"), actions)

    assert len(shop.payments.charges) == 1
    assert shop.payments.calls == 2  # the second call was answered from the idempotency key
    state = decode_session_state(actions.state)
    assert state is not None and state.next_step == 4


def test_a_replayed_session_seeded_with_context_keeps_its_order_number_and_total() -> None:
    shop = Shop()
    first = InMemorySessionActions()
    outage = parse_order({**ORDER, "card_token": "tok_outage"})
    run_session(shop.processor(), purchase_messages("job-7", outage), first)
    shop.payments.outage_tokens.clear()
    context = {
        "order_number": "ORD-00000001",
        "total": "29.95",
        "subtotal": "20.00",
        "tax": "5.00",
        "shipping": "4.95",
        "currency": "EUR",
        "lines": [
            {"sku": "MUG", "name": "Mug", "quantity": 2, "unit_price": "8.50", "amount": "17.00"}
        ],
    }
    from shared.domain.session_state import SessionState

    replay = InMemorySessionActions(
        state=SessionState(
            next_step=3, completed=("GenerateOrderNumber", "CalculateTotal"), context=context
        ).to_bytes()
    )
    run_session(shop.processor(), purchase_messages("job-7", outage)[2:], replay)

    assert replay.settlements == [("complete",)] * 3
    [charge] = shop.payments.charges.values()
    assert charge.amount == Decimal("29.95")
    assert shop.renderer.rendered[0].order_number == "ORD-00000001"


def test_generate_order_number_is_idempotent_per_job() -> None:
    shop = Shop()
    actions = InMemorySessionActions()
    processor = shop.processor()
    first = purchase_messages("job-8", parse_order(ORDER))[0]
    processor.handle(IncomingMessage(body=first.to_json(), session_id="s"), actions)
    actions.state = None  # lost the state write: the redelivery allocates again
    processor.handle(IncomingMessage(body=first.to_json(), session_id="s"), actions)
    state = decode_session_state(actions.state)
    assert state is not None and state.context["order_number"] == "ORD-00000001"
    assert len(shop.order_numbers.by_job) == 1


def test_product_import_goes_on_past_bad_rows_and_names_the_field() -> None:
    catalog = InMemoryProductCatalog()
    processor = SessionProcessor(
        pipeline=PRODUCT_IMPORT,
        tasks=import_tasks(catalog),
        policy=FailurePolicy.CONTINUE_ON_FAILURE,
    )
    rows = [
        {"sku": "A", "name": "Apple", "price": "1.00", "currency": "EUR"},
        {"sku": "B", "name": "Banana", "currency": "EUR"},
        {"sku": "C", "name": "Cherry", "price": "2.50", "currency": "EUR"},
    ]
    messages = [import_message("imp-1", i, is_last=i == 3, row=r) for i, r in enumerate(rows, 1)]
    actions = InMemorySessionActions()

    run_session(processor, messages, actions)

    assert [s[:2] for s in actions.settlements] == [
        ("complete",),
        ("dead_letter", "InvalidProduct:price"),
        ("complete",),
    ]
    assert "Row 2" in actions.settlements[1][2]
    assert sorted(catalog.products) == ["A", "C"]
    assert actions.state is None


def submit_order(
    document: dict, *, sender: InMemoryTaskSender, queue_name: str, idempotency_key: str = ""
) -> StartedJob:
    """``POST /api/orders``'s start of a purchase, without its stores."""
    return start_job(
        PIPELINES.get(PURCHASE),
        document,
        sender=sender,
        queue_name=queue_name,
        idempotency_key=idempotency_key,
    )


def test_submit_order_enqueues_one_session_of_five_ordered_tasks() -> None:
    sender = InMemoryTaskSender()
    submitted = submit_order(ORDER, sender=sender, queue_name="purchase-tasks")
    [(queue, session_id, messages)] = sender.sessions
    assert (queue, session_id) == ("purchase-tasks", submitted.session_id)
    assert [m.step for m in messages] == [1, 2, 3, 4, 5]
    assert {m.job_id for m in messages} == {submitted.job_id}


def test_an_order_goes_out_in_its_canonical_form() -> None:
    sender = InMemoryTaskSender()
    submit_order({**ORDER, "coupon": "none"}, sender=sender, queue_name="q")
    [(_, _, messages)] = sender.sessions
    assert all(m.payload == parse_order(ORDER).to_payload() for m in messages)


def test_submit_order_with_an_idempotency_key_maps_to_the_same_job() -> None:
    sender = InMemoryTaskSender()
    a = submit_order(ORDER, sender=sender, queue_name="q", idempotency_key="k-1")
    b = submit_order(ORDER, sender=sender, queue_name="q", idempotency_key="k-1")
    c = submit_order(ORDER, sender=sender, queue_name="q", idempotency_key="k-2")
    assert a.job_id == b.job_id != c.job_id
    assert [m.message_id() for m in sender.sessions[0][2]] == [
        m.message_id() for m in sender.sessions[1][2]
    ]


@pytest.mark.parametrize(
    ("order", "field"),
    [
        ({**ORDER, "lines": []}, "lines"),
        ({**ORDER, "lines": [{"sku": "MUG", "quantity": -2}]}, "lines[0].quantity"),
    ],
)
def test_submit_order_refuses_a_bad_order_and_sends_nothing(order: dict, field: str) -> None:
    sender = InMemoryTaskSender()
    with pytest.raises(InvalidInput) as error:
        submit_order(order, sender=sender, queue_name="q")
    assert error.value.field == field
    assert sender.sessions == []
