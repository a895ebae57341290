"""The five purchase tasks. Each is idempotent: a redelivery, or a replay of the session,
does no harm, charges nothing twice and mails nothing twice (``ReceiptMailer``). Each returns
the small outputs later tasks need; the processor keeps them in the session state's context."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import partial
from typing import Any

from ..config import Settings
from ..domain.errors import InvalidInput, PermanentTaskError
from ..domain.orders import Order, parse_order
from ..domain.payments import payment_idempotency_key
from ..domain.pipelines import (
    CALCULATE_TOTAL,
    GENERATE_ORDER_NUMBER,
    GENERATE_RECEIPT,
    PROCESS_PAYMENT,
    PURCHASE_TASKS,
    SEND_RECEIPT_EMAIL,
)
from ..domain.pricing import calculate_totals
from ..domain.receipt_emails import SENT
from ..domain.receipts import Receipt, ReceiptLine
from .clock import Clock, utc_now
from .observers import order_end_observer
from .ports import (
    Attachment,
    Email,
    OrderNumbers,
    OrderProgress,
    PaymentGateway,
    ProductCatalog,
    ReceiptRenderer,
    ReceiptStore,
)
from .receipt_mailer import ReceiptMailer
from .session_messages import Observer, Task, TaskInvocation


@dataclass(frozen=True)
class PurchaseDependencies:
    order_numbers: OrderNumbers
    catalog: ProductCatalog
    payments: PaymentGateway
    receipts: ReceiptStore
    renderer: ReceiptRenderer
    mailer: ReceiptMailer
    tax_rate: Decimal
    shipping_fee: Decimal
    clock: Clock = utc_now


def build_tasks(
    order_numbers: OrderNumbers,
    catalog: ProductCatalog,
    payments: PaymentGateway,
    receipts: ReceiptStore,
    receipt_renderer: ReceiptRenderer,
    receipt_mailer: ReceiptMailer,
    settings: Settings,
) -> dict[str, Task]:
    """The purchase's tasks, from the container's parts (``shared.bootstrap.wiring``)."""
    return purchase_tasks(
        PurchaseDependencies(
            order_numbers=order_numbers,
            catalog=catalog,
            payments=payments,
            receipts=receipts,
            renderer=receipt_renderer,
            mailer=receipt_mailer,
            tax_rate=settings.tax_rate,
            shipping_fee=settings.shipping_fee,
        )
    )


def build_observer(order_progress: OrderProgress, settings: Settings) -> Observer | None:
    """With ``ORDER_STEP_ROWS``, each order's end as the step row that releases before this
    one read (docs/deploy.md, "Upgrading"); else none: ``GET /api/orders/{job_id}`` reads the
    sessions' outcomes."""
    if not settings.order_step_rows:
        return None
    return order_end_observer(order_progress, last_step=len(PURCHASE_TASKS))


def purchase_tasks(deps: PurchaseDependencies) -> dict[str, Task]:
    return {
        GENERATE_ORDER_NUMBER: partial(generate_order_number, deps),
        CALCULATE_TOTAL: partial(calculate_total, deps),
        PROCESS_PAYMENT: partial(process_payment, deps),
        GENERATE_RECEIPT: partial(generate_receipt, deps),
        SEND_RECEIPT_EMAIL: partial(send_receipt_email, deps),
    }


def generate_order_number(deps: PurchaseDependencies, call: TaskInvocation) -> Mapping[str, Any]:
    if "order_number" in call.context:  # a replayed session keeps its order number
        return {}
    return {"order_number": deps.order_numbers.allocate(call.message.job_id)}


def calculate_total(deps: PurchaseDependencies, call: TaskInvocation) -> Mapping[str, Any]:
    order = _order(call)
    skus = sorted({line.sku for line in order.lines})
    products = deps.catalog.find(skus)
    missing = [sku for sku in skus if sku not in products]
    if missing:
        raise PermanentTaskError(
            "UnknownSku",
            f"SKU {', '.join(missing)} is not in the product catalogue. Import the product "
            "(or correct the order), then replay the session.",
        )
    wrong_currency = sorted(s for s in skus if products[s].currency != order.currency)
    if wrong_currency:
        raise PermanentTaskError(
            "CurrencyMismatch",
            f"The order is in {order.currency} but {', '.join(wrong_currency)} is priced in "
            f"{products[wrong_currency[0]].currency}.",
        )
    totals = calculate_totals(
        order.lines,
        {sku: product.price for sku, product in products.items()},
        tax_rate=deps.tax_rate,
        shipping=deps.shipping_fee,
    )
    lines = [
        {
            "sku": line.sku,
            "name": products[line.sku].name,
            "quantity": line.quantity,
            "unit_price": str(products[line.sku].price),
            "amount": str(products[line.sku].price * line.quantity),
        }
        for line in order.lines
    ]
    return {**totals.as_context(), "currency": order.currency, "lines": lines}


def process_payment(deps: PurchaseDependencies, call: TaskInvocation) -> Mapping[str, Any]:
    if "charge_id" in call.context:
        return {}
    order = _order(call)
    total = _needs(call, "total", CALCULATE_TOTAL)
    charge = deps.payments.charge(
        idempotency_key=payment_idempotency_key(call.message.job_id),
        card_token=order.card_token,
        amount=Decimal(total),
        currency=order.currency,
    )
    return {"charge_id": charge.charge_id}


def generate_receipt(deps: PurchaseDependencies, call: TaskInvocation) -> Mapping[str, Any]:
    order = _order(call)
    order_number = _needs(call, "order_number", GENERATE_ORDER_NUMBER)
    receipt = Receipt(
        order_number=order_number,
        customer_name=order.customer_name,
        customer_email=order.customer_email,
        currency=order.currency,
        lines=tuple(
            ReceiptLine(
                sku=line["sku"],
                name=line["name"],
                quantity=int(line["quantity"]),
                unit_price=Decimal(line["unit_price"]),
                amount=Decimal(line["amount"]),
            )
            for line in _needs(call, "lines", CALCULATE_TOTAL)
        ),
        subtotal=Decimal(_needs(call, "subtotal", CALCULATE_TOTAL)),
        tax=Decimal(_needs(call, "tax", CALCULATE_TOTAL)),
        shipping=Decimal(_needs(call, "shipping", CALCULATE_TOTAL)),
        total=Decimal(_needs(call, "total", CALCULATE_TOTAL)),
        charge_id=_needs(call, "charge_id", PROCESS_PAYMENT),
        issued_at=deps.clock().isoformat(timespec="seconds"),
    )
    location = deps.receipts.save(order_number, deps.renderer.render(receipt))
    return {"receipt": location}


def send_receipt_email(deps: PurchaseDependencies, call: TaskInvocation) -> Mapping[str, Any]:
    order = _order(call)
    order_number = _needs(call, "order_number", GENERATE_ORDER_NUMBER)
    _needs(call, "receipt", GENERATE_RECEIPT)
    pdf = deps.receipts.load(order_number)
    total = _needs(call, "total", CALCULATE_TOTAL)
    email = receipt_email(call.message.job_id, order, order_number, total, pdf)
    record = deps.mailer.deliver(call.message.job_id, call.message.step, email)
    if record.status != SENT:  # may have been sent: the order's status shows it to a person
        return {"receipt_email": record.status}
    return {"receipt_email": SENT, "receipt_emailed_at": deps.clock().isoformat(timespec="seconds")}


def receipt_email(job_id: str, order: Order, order_number: str, total: str, pdf: bytes) -> Email:
    """The receipt e-mail of an order, the PDF attached."""
    return Email(
        to=order.customer_email,
        subject=f"Your receipt for order {order_number}",
        text=(
            f"Hello {order.customer_name},\n\nthank you for your order {order_number}. "
            f"We charged {total} {order.currency}. Your receipt is attached.\n"
        ),
        # Stable across redeliveries, so a mail client can fold a duplicate.
        message_id=f"<{job_id}.receipt@pipelines.local>",
        attachments=(Attachment(f"{order_number}.pdf", "application/pdf", pdf),),
    )


def _order(call: TaskInvocation) -> Order:
    try:
        return parse_order(call.message.payload)
    except InvalidInput as error:
        raise PermanentTaskError(
            "InvalidOrder", f"The order in the message is invalid: {error}. Submit it again."
        ) from error


def _needs(call: TaskInvocation, key: str, producer: str) -> Any:
    if key not in call.context:
        raise PermanentTaskError(
            "MissingContext",
            f"{call.message.task} needs '{key}' from {producer}, which is not in the session "
            "state. Replay the whole session.",
        )
    return call.context[key]
