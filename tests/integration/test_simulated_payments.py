from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import pytest
from azure.data.tables import TableClient

from shared.adapters.simulated_payments import TableSimulatedPaymentGateway
from shared.domain.payments import Charge, PaymentDeclined, PaymentProviderUnavailable

from .conftest import Counted

pytestmark = pytest.mark.integration


def charge(
    gateway: TableSimulatedPaymentGateway, key: str, card: str = "tok_visa", **kw: str
) -> Charge:
    return gateway.charge(
        idempotency_key=key,
        card_token=card,
        amount=Decimal(kw.get("amount", "42.50")),
        currency=kw.get("currency", "EUR"),
    )


def test_the_same_key_charges_once(table: TableClient) -> None:
    gateway = TableSimulatedPaymentGateway(table)

    first = charge(gateway, "job-1:payment")
    again = charge(gateway, "job-1:payment")
    # Another worker, same table: still the first charge.
    from_elsewhere = charge(TableSimulatedPaymentGateway(table), "job-1:payment")

    assert first.charge_id.startswith("ch_")
    assert (first.amount, first.currency, first.idempotency_key) == (
        Decimal("42.50"),
        "EUR",
        "job-1:payment",
    )
    assert again == first == from_elsewhere
    assert gateway.list_charges() == [first]


def test_different_keys_make_different_charges(table: TableClient) -> None:
    gateway = TableSimulatedPaymentGateway(table)

    first = charge(gateway, "job-1:payment")
    second = charge(gateway, "job-2/odd?key#", amount="10.00")

    assert first.charge_id != second.charge_id
    assert gateway.list_charges() == [first, second]


def test_a_key_reused_with_another_amount_is_declined(table: TableClient) -> None:
    gateway = TableSimulatedPaymentGateway(table)
    first = charge(gateway, "job-1:payment")

    with pytest.raises(PaymentDeclined) as declined:
        charge(gateway, "job-1:payment", amount="99.00")
    with pytest.raises(PaymentDeclined):
        charge(gateway, "job-1:payment", currency="USD")

    assert declined.value.retryable is False
    assert "reused with different parameters" in declined.value.description
    assert gateway.list_charges() == [first]


def test_a_declined_card_is_a_permanent_failure_and_charges_nothing(table: TableClient) -> None:
    gateway = TableSimulatedPaymentGateway(table, decline_tokens=frozenset({"tok_declined"}))

    with pytest.raises(PaymentDeclined) as declined:
        charge(gateway, "job-1:payment", card="tok_declined")

    assert declined.value.reason == "PaymentDeclined"
    assert declined.value.retryable is False
    assert "tok_declined was declined by the issuer" in declined.value.description
    assert "another card" in declined.value.description
    assert gateway.list_charges() == []


def test_an_outage_is_transient_and_can_be_switched_off_at_run_time(table: TableClient) -> None:
    configured = frozenset({"tok_outage"})
    gateway = TableSimulatedPaymentGateway(table, outage_tokens=configured)

    with pytest.raises(PaymentProviderUnavailable) as unavailable:
        charge(gateway, "job-1:payment", card="tok_outage")
    assert unavailable.value.retryable is True
    assert gateway.list_charges() == []

    # A demo switches the outage off from another process: the running gateway sees it.
    TableSimulatedPaymentGateway(table).set_outage(None)
    paid = charge(gateway, "job-1:payment", card="tok_outage")

    assert gateway.list_charges() == [paid]


def test_set_outage_for_every_card_then_reset_to_the_settings(table: TableClient) -> None:
    gateway = TableSimulatedPaymentGateway(table, outage_tokens=frozenset({"tok_outage"}))

    gateway.set_outage(["*"])
    with pytest.raises(PaymentProviderUnavailable):
        charge(gateway, "job-1:payment", card="tok_visa")

    gateway.reset_outage()
    gateway.reset_outage()  # already gone: still fine
    assert gateway.current_outage() == frozenset({"tok_outage"})
    assert charge(gateway, "job-1:payment", card="tok_visa") in gateway.list_charges()
    with pytest.raises(PaymentProviderUnavailable):
        charge(gateway, "job-2:payment", card="tok_outage")


def test_a_charge_made_before_an_outage_is_still_returned(table: TableClient) -> None:
    gateway = TableSimulatedPaymentGateway(table)
    first = charge(gateway, "job-1:payment")

    gateway.set_outage(["*"])

    assert charge(gateway, "job-1:payment") == first


def test_concurrent_charges_with_one_key_make_one_charge(table: TableClient) -> None:
    gateway = TableSimulatedPaymentGateway(table)

    with ThreadPoolExecutor(max_workers=8) as pool:
        charges = list(pool.map(lambda _: charge(gateway, "job-1:payment"), range(16)))

    assert len(set(charges)) == 1
    assert gateway.list_charges() == [charges[0]]


def test_find_returns_the_charge_made_under_a_key_or_none(table: TableClient) -> None:
    gateway = TableSimulatedPaymentGateway(table)
    assert gateway.find("job/1:payment") is None

    charge = gateway.charge(
        idempotency_key="job/1:payment", card_token="tok", amount=Decimal("9.95"), currency="EUR"
    )

    assert gateway.find("job/1:payment") == charge


def test_a_new_charge_is_one_insert_and_the_switch_is_read_once_per_refresh(
    counted: Counted,
) -> None:
    requests = counted.requests
    gateway = TableSimulatedPaymentGateway(counted.table, refresh=60)

    for n in range(5):
        charge(gateway, f"job-{n}:payment")

    # the switch read once (GET), then one insert (POST) a charge
    assert requests == ["GET"] + ["POST"] * 5
