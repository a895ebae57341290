"""What the purchase's tasks and an order's status reach: order numbers, the catalogue,
payments, receipts and their e-mails, and each order's progress."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Protocol

from ...domain.order_status import OrderRecord, StepOutcome
from ...domain.payments import Charge
from ...domain.products import Product
from ...domain.receipt_emails import ReceiptEmail
from ...domain.receipts import Receipt


class OrderNumbers(Protocol):
    def allocate(self, job_id: str) -> str:
        """A new unique order number for the job; the same one again for the same job."""
        ...

    def find(self, job_id: str) -> str | None:
        """The job's order number, or None before one was allocated."""
        ...

    def find_job(self, order_number: str) -> str | None:
        """The job the order number was allocated to, or None."""
        ...


class ProductCatalog(Protocol):
    def find(self, skus: Sequence[str]) -> dict[str, Product]:
        """The products that exist among ``skus`` (missing ones are left out)."""
        ...

    def upsert(self, product: Product) -> None:
        """Insert or replace the product under its SKU; repeating it changes nothing."""
        ...

    def upsert_many(self, products: Sequence[Product]) -> None:
        """Create or replace each product, in as few requests as the store allows; a SKU given
        twice keeps its last product. Raises when any could not be written (a retry writes
        them all again)."""
        ...


class PaymentGateway(Protocol):
    def charge(
        self, *, idempotency_key: str, card_token: str, amount: Decimal, currency: str
    ) -> Charge:
        """Charge once per idempotency key: a repeat returns the first charge.
        Raises ``PaymentDeclined`` or ``PaymentProviderUnavailable``."""
        ...

    def find(self, idempotency_key: str) -> Charge | None:
        """The charge made under the key, or None."""
        ...


class ReceiptStore(Protocol):
    def save(self, order_number: str, pdf: bytes) -> str:
        """Store (overwrite) the receipt and return where it is."""
        ...

    def load(self, order_number: str) -> bytes:
        """The stored receipt, byte for byte; raises ``ReceiptNotFound`` when there is none."""
        ...


class ReceiptEmails(Protocol):
    """The records of the jobs' receipt e-mails (``shared.domain.receipt_emails``)."""

    def create(self, record: ReceiptEmail) -> ReceiptEmail | None:
        """Write ``record`` unless the job has one: None when it was written, else the job's
        record as stored (which ``record`` did not replace)."""
        ...

    def save(self, record: ReceiptEmail) -> ReceiptEmail:
        """Write ``record`` over the job's; returns it as stored (``updated_at`` set)."""
        ...

    def find(self, job_id: str) -> ReceiptEmail | None:
        """The job's record, None when its receipt was never attempted."""
        ...


class ReceiptRenderer(Protocol):
    def render(self, receipt: Receipt) -> bytes:
        """The receipt as a PDF document."""
        ...


class OrderProgress(Protocol):
    def accept(self, job_id: str, session_id: str, at: str) -> None:
        """Record that the order was accepted (before its tasks are enqueued); idempotent."""
        ...

    def withdraw(self, job_id: str, session_id: str) -> None:
        """Forget an acceptance whose tasks could not be enqueued; succeeds when there is
        none."""
        ...

    def record(self, job_id: str, outcome: StepOutcome) -> None:
        """Upsert the outcome of one step as a step row, which releases before this one read
        an order's status from (``order_end_observer``)."""
        ...

    def find(self, job_id: str) -> OrderRecord | None:
        """The order's record (its acceptance, and its step rows), or None when it was never
        accepted."""
        ...

    def records(self, *, up_to: int) -> list[OrderRecord]:
        """The recorded orders, at most ``up_to`` of them (in no particular order)."""
        ...
