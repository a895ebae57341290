"""A payment provider simulated on Azure Tables, with a real provider's idempotency keys.

Used locally and in demos instead of a real provider. Which cards are declined comes from
the settings; which cards hit an outage can also be switched at run time (``set_outage``): the
switch is kept in the same table, and each gateway reads it at most once per
``OUTAGE_REFRESH_SECONDS`` (a charge costs one insert, not three requests), so ``set_outage``
and ``reset_outage`` return once every gateway has had time to read the new switch.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.data.tables import TableClient, TableEntity, UpdateMode

from ..domain.payments import Charge, PaymentDeclined, PaymentProviderUnavailable
from .azure_errors import TABLE_STORAGE, translated
from .table_keys import table_key

ALL_CARDS = "*"
_CHARGE_ROW = "charge"
# table_key never yields a key starting with '!', so the control entity cannot collide
# with the charge of any idempotency key.
_CONTROL_PARTITION = "!simulator"
_OUTAGE_ROW = "outage"
# How long a gateway keeps the outage switch it read before it reads it again.
OUTAGE_REFRESH_SECONDS = 1.0


class TableSimulatedPaymentGateway:
    """``charge`` answers, in this order:

    1. a key seen before: the first charge again, or ``PaymentDeclined`` when the key comes
       back with another amount, currency or card (as real providers refuse a reused key);
    2. an outage for the card (or for ``*``): ``PaymentProviderUnavailable``, transient;
    3. a card in ``decline_tokens``: ``PaymentDeclined``, permanent;
    4. otherwise a new charge, stored under the key. Two concurrent calls with the same key
       create one charge: the loser of the insert returns the winner's.

    A new charge is one insert: the key is looked up only when the insert finds it taken,
    or before an outage's or a decline's answer (so a key charged before still answers its
    charge). The outage switch is read at most once per ``refresh`` seconds.
    """

    def __init__(
        self,
        table: TableClient,
        *,
        decline_tokens: frozenset[str] = frozenset(),
        outage_tokens: frozenset[str] = frozenset(),
        refresh: float = OUTAGE_REFRESH_SECONDS,
    ) -> None:
        self._table = table
        self._decline_tokens = frozenset(decline_tokens)
        self._outage_tokens = frozenset(outage_tokens)
        self._refresh = refresh
        self._lock = threading.Lock()
        self._outage: tuple[float, frozenset[str]] | None = None  # (read at, cards)

    @translated(TABLE_STORAGE)
    def charge(
        self, *, idempotency_key: str, card_token: str, amount: Decimal, currency: str
    ) -> Charge:
        requested = {"Amount": str(amount), "Currency": currency, "CardToken": card_token}
        partition = table_key(idempotency_key)
        outage = self._outage_now()
        refused = card_token in outage or ALL_CARDS in outage or card_token in self._decline_tokens
        if refused and (existing := self._get(partition, _CHARGE_ROW)) is not None:
            return _replay(existing, idempotency_key, amount, currency, card_token)
        if card_token in outage or ALL_CARDS in outage:
            raise PaymentProviderUnavailable(
                f"The payment provider did not answer for card {card_token} (simulated "
                "outage). The payment will be retried; nothing was charged."
            )
        if card_token in self._decline_tokens:
            raise PaymentDeclined(
                f"The card {card_token} was declined by the issuer; ask the customer for "
                "another card and submit the order again."
            )
        entity = {
            "PartitionKey": partition,
            "RowKey": _CHARGE_ROW,
            "IdempotencyKey": idempotency_key,
            "ChargeId": f"ch_{uuid.uuid4().hex[:24]}",
            "CreatedAt": datetime.now(UTC).isoformat(timespec="microseconds"),
            **requested,
        }
        try:
            self._table.create_entity(entity)
        except ResourceExistsError:
            winner = self._get(partition, _CHARGE_ROW)
            if winner is None:  # created and deleted in between: nothing sane to return
                raise
            return _replay(winner, idempotency_key, amount, currency, card_token)
        return _to_charge(entity)

    @translated(TABLE_STORAGE)
    def find(self, idempotency_key: str) -> Charge | None:
        entity = self._get(table_key(idempotency_key), _CHARGE_ROW)
        return _to_charge(entity) if entity is not None else None

    @translated(TABLE_STORAGE)
    def set_outage(self, tokens: Iterable[str] | None) -> None:
        """From now on the provider is down for ``tokens`` (``*`` for every card) and up for
        every other card; ``None`` or an empty list means up for all. Overrides the outage
        tokens given to the constructor, for every gateway on this table, until
        ``reset_outage``."""
        chosen = sorted(set(tokens or ()))
        self._table.upsert_entity(
            {
                "PartitionKey": _CONTROL_PARTITION,
                "RowKey": _OUTAGE_ROW,
                "Tokens": json.dumps(chosen),
            },
            mode=UpdateMode.REPLACE,
        )
        self._switched()

    @translated(TABLE_STORAGE)
    def reset_outage(self) -> None:
        """Back to the outage tokens given to the constructor (the settings)."""
        self._table.delete_entity(_CONTROL_PARTITION, _OUTAGE_ROW)  # no error when absent
        self._switched()

    @translated(TABLE_STORAGE)
    def current_outage(self) -> frozenset[str]:
        """The cards the provider is down for right now."""
        control = self._get(_CONTROL_PARTITION, _OUTAGE_ROW)
        if control is None:
            return self._outage_tokens
        return frozenset(json.loads(str(control["Tokens"])))

    @translated(TABLE_STORAGE)
    def list_charges(self) -> list[Charge]:
        """Every charge made through this table, oldest first."""
        entities = self._table.query_entities("RowKey eq @row", parameters={"row": _CHARGE_ROW})
        return [_to_charge(entity) for entity in sorted(entities, key=_created)]

    def _outage_now(self) -> frozenset[str]:
        """The outage switch as read at most ``refresh`` seconds ago."""
        with self._lock:
            if self._outage is not None and time.monotonic() - self._outage[0] < self._refresh:
                return self._outage[1]
        cards = self.current_outage()
        with self._lock:
            self._outage = (time.monotonic(), cards)
        return cards

    def _switched(self) -> None:
        """The switch changed: this gateway reads it afresh, and every other has read it by
        the time this returns."""
        with self._lock:
            self._outage = None
        time.sleep(self._refresh)

    def _get(self, partition: str, row: str) -> TableEntity | None:
        try:
            return self._table.get_entity(partition, row)
        except ResourceNotFoundError:
            return None


def _replay(
    entity: TableEntity, idempotency_key: str, amount: Decimal, currency: str, card_token: str
) -> Charge:
    first = _to_charge(entity)
    if (first.amount, first.currency, entity["CardToken"]) != (amount, currency, card_token):
        raise PaymentDeclined(
            f"The idempotency key {idempotency_key} was already used for a charge of "
            f"{first.amount} {first.currency} on card {entity['CardToken']} ({first.charge_id}) "
            f"and was reused with different parameters ({amount} {currency} on card "
            f"{card_token}). Nothing new was charged: use a new key for a new payment."
        )
    return first


def _to_charge(entity: Mapping[str, Any]) -> Charge:
    return Charge(
        charge_id=str(entity["ChargeId"]),
        idempotency_key=str(entity["IdempotencyKey"]),
        amount=Decimal(str(entity["Amount"])),
        currency=str(entity["Currency"]),
    )


def _created(entity: TableEntity) -> tuple[str, str]:
    return (str(entity["CreatedAt"]), str(entity["ChargeId"]))
