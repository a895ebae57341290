"""What a payment provider can answer."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from .errors import PermanentTaskError, TransientTaskError


def payment_idempotency_key(job_id: str) -> str:
    """One key per job: redeliveries and replays of a purchase charge the card once."""
    return f"{job_id}:payment"


@dataclass(frozen=True)
class Charge:
    charge_id: str
    idempotency_key: str
    amount: Decimal
    currency: str


class PaymentDeclined(PermanentTaskError):
    def __init__(self, description: str) -> None:
        super().__init__("PaymentDeclined", description)


PAYMENT_PROVIDER = "the payment provider"


class PaymentProviderUnavailable(TransientTaskError):
    def __init__(self, description: str) -> None:
        super().__init__("PaymentProviderUnavailable", description, dependency=PAYMENT_PROVIDER)
