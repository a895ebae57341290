"""Receipts rendered as one-page PDFs with ReportLab."""

from __future__ import annotations

from decimal import Decimal
from io import BytesIO
from xml.sax.saxutils import escape

from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import getSampleStyleSheet
from reportlab.lib.units import mm
from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

from ..domain.receipts import Receipt

_STYLES = getSampleStyleSheet()


class ReportLabReceiptRenderer:
    def render(self, receipt: Receipt) -> bytes:
        """The receipt as a PDF. The same receipt always gives the same bytes (ReportLab's
        invariant mode fixes the creation date and document id), so a redelivered task
        overwrites the stored receipt with an identical one."""
        buffer = BytesIO()
        document = SimpleDocTemplate(
            buffer,
            pagesize=A4,
            invariant=1,
            title=f"Receipt {receipt.order_number}",
            author="Shop",
            subject=f"Receipt for order {receipt.order_number}",
            leftMargin=20 * mm,
            rightMargin=20 * mm,
            topMargin=20 * mm,
            bottomMargin=20 * mm,
        )
        document.build(_story(receipt))
        return buffer.getvalue()


def _story(receipt: Receipt) -> list[object]:
    currency = receipt.currency
    heading = _STYLES["Heading1"]
    body = _STYLES["BodyText"]
    details = Table(
        [
            ["Order number", receipt.order_number],
            ["Customer", f"{receipt.customer_name} <{receipt.customer_email}>"],
            ["Issued at", receipt.issued_at],
            ["Charge", receipt.charge_id],
        ],
        colWidths=[35 * mm, None],
        hAlign="LEFT",
    )
    details.setStyle(TableStyle([("FONTNAME", (0, 0), (0, -1), "Helvetica-Bold")]))

    rows: list[list[object]] = [["SKU", "Item", "Qty", "Unit price", "Amount"]]
    rows += [
        [
            line.sku,
            Paragraph(escape(line.name), body),
            str(line.quantity),
            _money(line.unit_price, currency),
            _money(line.amount, currency),
        ]
        for line in receipt.lines
    ]
    first_total = len(rows)
    rows += [
        ["", "Subtotal", "", "", _money(receipt.subtotal, currency)],
        ["", "Tax", "", "", _money(receipt.tax, currency)],
        ["", "Shipping", "", "", _money(receipt.shipping, currency)],
        ["", "Total", "", "", _money(receipt.total, currency)],
    ]
    lines = Table(rows, colWidths=[30 * mm, 60 * mm, 15 * mm, 30 * mm, 35 * mm], repeatRows=1)
    lines.setStyle(
        TableStyle(
            [
                ("FONTNAME", (0, 0), (-1, 0), "Helvetica-Bold"),
                ("LINEBELOW", (0, 0), (-1, 0), 0.75, colors.black),
                ("ALIGN", (2, 0), (-1, -1), "RIGHT"),
                ("LINEABOVE", (0, first_total), (-1, first_total), 0.5, colors.grey),
                ("FONTNAME", (0, -1), (-1, -1), "Helvetica-Bold"),
                ("LINEABOVE", (0, -1), (-1, -1), 0.75, colors.black),
            ]
        )
    )
    return [
        Paragraph("Receipt", heading),
        details,
        Spacer(1, 8 * mm),
        lines,
        Spacer(1, 8 * mm),
        Paragraph(escape(f"Thank you for your order {receipt.order_number}."), body),
    ]


def _money(amount: Decimal, currency: str) -> str:
    return f"{amount:,.2f} {currency}"
