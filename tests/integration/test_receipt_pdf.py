from __future__ import annotations

from decimal import Decimal
from io import BytesIO

import pytest
from pypdf import PdfReader

from shared.adapters.pdf_receipts import ReportLabReceiptRenderer
from shared.domain.receipts import Receipt, ReceiptLine

pytestmark = pytest.mark.integration

RECEIPT = Receipt(
    order_number="ORD-00000042",
    customer_name="Ada Lovelace",
    customer_email="ada@example.com",
    currency="EUR",
    lines=(
        ReceiptLine("MUG-1", "Blue mug", 2, Decimal("19.99"), Decimal("39.98")),
        ReceiptLine("PEN-2", "Fountain pen & ink", 1, Decimal("12.00"), Decimal("12.00")),
    ),
    subtotal=Decimal("51.98"),
    tax=Decimal("13.00"),
    shipping=Decimal("4.95"),
    total=Decimal("69.93"),
    charge_id="ch_0123456789abcdef",
    issued_at="2026-11-23T06:00:00+00:00",
)


def test_the_receipt_is_a_readable_pdf_with_the_order_and_its_total() -> None:
    pdf = ReportLabReceiptRenderer().render(RECEIPT)

    reader = PdfReader(BytesIO(pdf))
    text = "\n".join(page.extract_text() for page in reader.pages)

    assert pdf.startswith(b"%PDF-")
    assert len(reader.pages) == 1
    for expected in (
        "ORD-00000042",
        "Ada Lovelace",
        "ada@example.com",
        "Blue mug",
        "Fountain pen & ink",
        "39.98 EUR",
        "51.98 EUR",
        "13.00 EUR",
        "4.95 EUR",
        "69.93 EUR",
        "ch_0123456789abcdef",
        "2026-11-23T06:00:00+00:00",
    ):
        assert expected in text, f"{expected!r} is not in the PDF text:\n{text}"
    assert reader.metadata is not None
    assert reader.metadata.title == "Receipt ORD-00000042"


def test_the_same_receipt_renders_to_the_same_bytes() -> None:
    renderer = ReportLabReceiptRenderer()

    assert renderer.render(RECEIPT) == renderer.render(RECEIPT)


def test_reportlab_renders_with_its_c_accelerators() -> None:
    # rl_accel (requirements.txt) replaces ReportLab's pure-Python number formatting and
    # ASCII85 encoding, byte for byte; without it each receipt costs about a quarter more CPU.
    from reportlab.lib import rl_accel

    assert type(rl_accel.fp_str).__name__ == "builtin_function_or_method"
    assert type(rl_accel.asciiBase85Encode).__name__ == "builtin_function_or_method"
