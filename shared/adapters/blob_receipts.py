"""Receipts as PDF blobs, one per order: ``<container>/<order number>.pdf``."""

from __future__ import annotations

from azure.core.exceptions import ResourceNotFoundError
from azure.storage.blob import ContainerClient, ContentSettings

from ..domain.errors import NotFound
from .azure_errors import BLOB_STORAGE, translated

PDF = "application/pdf"


class ReceiptNotFound(NotFound):
    """No receipt is stored for the order."""


class BlobReceiptStore:
    def __init__(self, container: ContainerClient) -> None:
        self._container = container

    @translated(BLOB_STORAGE)
    def save(self, order_number: str, pdf: bytes) -> str:
        """Write (or overwrite: a redelivered task renders the same receipt again) and return
        the location as ``<container>/<blob>``, e.g. ``receipts/ORD-00000001.pdf``."""
        name = receipt_blob_name(order_number)
        self._container.upload_blob(
            name, pdf, overwrite=True, content_settings=ContentSettings(content_type=PDF)
        )
        return f"{self._container.container_name}/{name}"

    @translated(BLOB_STORAGE)
    def load(self, order_number: str) -> bytes:
        """The stored PDF, byte for byte. Raises ``ReceiptNotFound`` when there is none."""
        try:
            return self._container.download_blob(receipt_blob_name(order_number)).readall()
        except ResourceNotFoundError as error:
            raise ReceiptNotFound(
                f"No receipt for order {order_number} in container "
                f"{self._container.container_name}: generate it before sending it."
            ) from error


def receipt_blob_name(order_number: str) -> str:
    """The blob of an order's receipt: ``<order number>.pdf``."""
    if not order_number or "/" in order_number or order_number in (".", ".."):
        raise ValueError(f"{order_number!r} cannot name a receipt blob")
    return f"{order_number}.pdf"
