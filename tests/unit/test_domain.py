"""The envelope, the session state document, orders, products and pricing."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from shared.domain.envelope import (
    TaskMessage,
    body_bytes,
    parse_task_message,
    plain_properties,
    routing_hint,
)
from shared.domain.errors import InvalidInput, MalformedMessage
from shared.domain.orders import OrderLine, parse_order
from shared.domain.pipelines import PURCHASE_TASKS, purchase_messages
from shared.domain.pricing import calculate_totals
from shared.domain.products import parse_product
from shared.domain.session_state import (
    CorruptSessionState,
    Failure,
    SessionState,
    decode_session_state,
)
from tests.builders import order_document

VALID = {
    "job_id": "j-1",
    "pipeline": "purchase",
    "task": "CalculateTotal",
    "step": 2,
    "is_last": False,
    "payload": {"a": 1},
}

AT = "2026-01-01T00:00:00+00:00"


def test_envelope_round_trips_and_repeats_routing_fields_as_properties() -> None:
    message = parse_task_message(json.dumps(VALID).encode())
    assert parse_task_message(message.to_json()) == message
    assert message.application_properties() == {
        "job_id": "j-1",
        "pipeline": "purchase",
        "task": "CalculateTotal",
        "step": 2,
        "is_last": False,
    }
    assert message.message_id() == "j-1:2"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"job_id": None}, "job_id"),
        ({"step": "2"}, "step"),
        ({"step": 0}, "step"),
        ({"step": 2.0}, "step"),
        ({"is_last": "no"}, "is_last"),
        ({"payload": []}, "payload"),
        ({"task": "  "}, "task"),
        ({"extra": 1}, "extra"),
    ],
)
def test_envelope_names_the_wrong_field(change: dict, field: str) -> None:
    document = {**VALID, **change}
    with pytest.raises(MalformedMessage) as error:
        parse_task_message(json.dumps(document))
    assert error.value.field == field


@pytest.mark.parametrize("missing", ["job_id", "pipeline", "task", "step", "is_last", "payload"])
def test_envelope_names_a_missing_field(missing: str) -> None:
    document = {k: v for k, v in VALID.items() if k != missing}
    with pytest.raises(MalformedMessage, match=f"{missing}: is missing"):
        parse_task_message(json.dumps(document))


@pytest.mark.parametrize("body", [b"", b"{", b"\xff", b"null", b"3"])
def test_envelope_rejects_unreadable_bodies(body: bytes) -> None:
    with pytest.raises(MalformedMessage) as error:
        parse_task_message(body)
    assert error.value.field == "body"


def test_application_properties_come_back_as_they_were_sent() -> None:
    at = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    received = {b"job_id": b"job-1", b"step": 2, "is_last": False, "raw": b"\xff\x00", "at": at}

    assert plain_properties(received) == {
        "job_id": "job-1",  # the SDK decodes AMQP strings as bytes
        "step": 2,
        "is_last": False,
        "raw": b"\xff\x00",  # not UTF-8: binary, kept
        "at": str(at),
    }
    assert plain_properties(None) == {}


def test_a_body_is_bytes_whatever_section_carried_it() -> None:
    assert body_bytes(iter([b"{", b"}"])) == b"{}"  # data sections, as the SDK yields them
    assert body_bytes("é") == "é".encode()
    assert body_bytes(None) == b""
    with pytest.raises(TypeError):
        body_bytes(42)


def test_routing_hint_reads_string_or_bytes_keys_and_ignores_bad_values() -> None:
    assert routing_hint({b"step": 3, b"is_last": True}) == (3, True)
    assert routing_hint({"step": True, "is_last": "yes"}) == (None, False)
    assert routing_hint(None) == (None, False)


def test_session_state_round_trips() -> None:
    state = SessionState().after_success("GenerateOrderNumber", 1, {"order_number": "ORD-1"})
    state = state.mark_failed(Failure("CalculateTotal", 2, "UnknownSku", "x", AT))
    assert decode_session_state(state.to_bytes()) == state
    assert decode_session_state(None) is None
    assert decode_session_state(b"") is None


def test_a_session_of_many_rows_keeps_a_state_the_size_of_its_task_names() -> None:
    # Service Bus caps a session's state at its message size (256 KB on Standard).
    state = SessionState()
    for step in range(1, 20_001):
        state = state.after_success("ImportProduct", step, {})
    assert (state.completed, state.processed, state.next_step) == (
        ("ImportProduct",),
        20_000,
        20_001,
    )
    assert len(state.to_bytes()) < 1_000
    purchase = SessionState().after_success("A", 1, {}).after_success("B", 2, {})
    assert purchase.completed == ("A", "B")


def test_mark_failed_keeps_the_first_failure() -> None:
    state = SessionState().mark_failed(Failure("A", 1, "R1", "d", AT))
    state = state.mark_failed(Failure("B", 2, "R2", "d", AT))
    assert state.failure is not None and state.failure.reason == "R1"
    assert state.failed == 2


@pytest.mark.parametrize(
    "raw",
    [
        b"\x80",
        b"[]",
        b'{"version": 2}',
        b'{"version": 1, "status": "running", "next_step": "1", "completed": [], "context": {}}',
        b'{"version": 1, "status": "running", "next_step": 1, "completed": [1], "context": {}}',
        b'{"version": 1, "status": "running", "next_step": 1, "completed": [], "context": 3}',
    ],
)
def test_unreadable_state_raises_corrupt_session_state(raw: bytes) -> None:
    with pytest.raises(CorruptSessionState):
        decode_session_state(raw)


ORDER = order_document()


def test_a_valid_order_becomes_five_ordered_messages_of_one_job() -> None:
    order = parse_order(ORDER)
    messages = purchase_messages("job-9", order)
    assert [m.task for m in messages] == list(PURCHASE_TASKS)
    assert [m.step for m in messages] == [1, 2, 3, 4, 5]
    assert [m.is_last for m in messages] == [False, False, False, False, True]
    assert all(m.payload == order.to_payload() for m in messages)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"lines": []}, "lines"),
        ({"lines": None}, "lines"),
        ({"lines": [{"sku": "SKU-1", "quantity": -1}]}, "lines[0].quantity"),
        ({"lines": [{"sku": "SKU-1", "quantity": 0}]}, "lines[0].quantity"),
        ({"lines": [{"sku": "SKU-1", "quantity": 1.5}]}, "lines[0].quantity"),
        ({"lines": [{"sku": "SKU-1"}]}, "lines[0].quantity"),
        ({"lines": [{"sku": "bad sku!", "quantity": 1}]}, "lines[0].sku"),
        ({"lines": ["SKU-1"]}, "lines[0]"),
        ({"customer_email": "nope"}, "customer_email"),
        ({"customer_email": None}, "customer_email"),
        ({"currency": "euro"}, "currency"),
        ({"card_token": ""}, "card_token"),
    ],
)
def test_an_invalid_order_names_the_field(change: dict, field: str) -> None:
    with pytest.raises(InvalidInput) as error:
        parse_order({**ORDER, **change})
    assert error.value.field == field


@pytest.mark.parametrize(
    ("change", "field", "limit"),
    [
        ({"currency": "XXX"}, "currency", "ISO 4217 in circulation"),
        ({"currency": "XTS"}, "currency", "ISO 4217 in circulation"),
        ({"currency": "ABC"}, "currency", "ISO 4217 in circulation"),
        ({"customer_name": "Ada \u202eecilA"}, "customer_name", "bidi control U+202E"),
        ({"customer_name": "\u2067Ada\u2069"}, "customer_name", "bidi control U+2067"),
        ({"card_token": "tok\u200f_visa"}, "card_token", "bidi control U+200F"),
    ],
    ids=["XXX", "XTS", "ABC", "name-RLO", "name-isolate", "token-RLM"],
)
def test_an_order_that_would_read_or_price_otherwise_is_refused_naming_the_rule(
    change: dict, field: str, limit: str
) -> None:
    with pytest.raises(InvalidInput) as error:
        parse_order({**ORDER, **change})

    assert error.value.field == field and limit in error.value.problem


def test_currencies_in_circulation_and_names_in_any_script_are_taken() -> None:
    for currency in ("EUR", "USD", "JPY", "XOF", "CHF"):
        assert parse_order({**ORDER, "currency": currency}).currency == currency
    assert (
        parse_order({**ORDER, "customer_name": "\u05e9\u05e8\u05d4"}).customer_name
        == "\u05e9\u05e8\u05d4"
    )


def test_product_rows_are_checked_field_by_field() -> None:
    product = parse_product({"sku": "SKU-1", "name": "Mug", "price": "9.50", "currency": "eur"})
    assert (product.price, product.currency) == (Decimal("9.50"), "EUR")
    for row, field in [
        ({"name": "Mug", "price": 1, "currency": "EUR"}, "sku"),
        ({"sku": "S", "price": 1, "currency": "EUR"}, "name"),
        ({"sku": "S", "name": "Mug", "currency": "EUR"}, "price"),
        ({"sku": "S", "name": "Mug", "price": 0, "currency": "EUR"}, "price"),
        ({"sku": "S", "name": "Mug", "price": "-3", "currency": "EUR"}, "price"),
        ({"sku": "S", "name": "Mug", "price": "abc", "currency": "EUR"}, "price"),
        ({"sku": "S", "name": "Mug", "price": "1.001", "currency": "EUR"}, "price"),
        ({"sku": "S", "name": "Mug", "price": "NaN", "currency": "EUR"}, "price"),
        ({"sku": "S", "name": "Mug", "price": 1, "currency": "EURO"}, "currency"),
        ({"sku": "S", "name": "Mug", "price": 1, "currency": "XXX"}, "currency"),
    ]:
        with pytest.raises(InvalidInput) as error:
            parse_product(row)
        assert error.value.field == field, row


def test_totals_are_exact_decimals_rounded_half_up() -> None:
    totals = calculate_totals(
        [OrderLine("A", 3), OrderLine("B", 1)],
        {"A": Decimal("0.35"), "B": Decimal("10.00")},
        tax_rate=Decimal("0.25"),
        shipping=Decimal("4.95"),
    )
    assert totals.subtotal == Decimal("11.05")
    assert totals.tax == Decimal("2.76")  # 2.7625
    assert totals.total == Decimal("18.76")
    assert totals.as_context()["total"] == "18.76"


def test_task_message_refuses_a_bad_step_at_construction() -> None:
    with pytest.raises(MalformedMessage):
        TaskMessage(job_id="j", pipeline="p", task="t", step=0, is_last=True)
