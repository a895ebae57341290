"""Receipts as PDF blobs, one per order: ``<container>/<order number>.pdf``."""

from __future__ import annotations

import threading
from collections import OrderedDict

from azure.core.exceptions import ResourceNotFoundError
from azure.storage.blob import ContainerClient, ContentSettings

from ..domain.errors import NotFound
from .azure_errors import BLOB_STORAGE, translated

PDF = "application/pdf"
# Receipts this store saved and keeps in memory for the e-mail that follows them (a few KiB each).
KEPT_RECEIPTS = 64


class ReceiptNotFound(NotFound):
    """No receipt is stored for the order."""


class BlobReceiptStore:
    """``load`` answers a receipt this store saved lately from memory, without downloading
    it: the e-mail task follows the rendering one in the same session, which the instance
    that rendered it holds. One that another instance saved, or that this one saved before its
    last ``kept`` receipts, is downloaded. (When another instance renders a receipt again after
    this one did, this one's copy differs from the blob in its time of issue only.)"""

    def __init__(self, container: ContainerClient, *, kept: int = KEPT_RECEIPTS) -> None:
        self._container = container
        self._kept = kept
        self._recent: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()

    @translated(BLOB_STORAGE)
    def save(self, order_number: str, pdf: bytes) -> str:
        """Write (or overwrite: a redelivered task renders the same receipt again) and return
        the location as ``<container>/<blob>``, e.g. ``receipts/ORD-00000001.pdf``."""
        name = receipt_blob_name(order_number)
        self._container.upload_blob(
            name, pdf, overwrite=True, content_settings=ContentSettings(content_type=PDF)
        )
        with self._lock:
            self._recent[order_number] = pdf
            self._recent.move_to_end(order_number)
            while len(self._recent) > self._kept:
                self._recent.popitem(last=False)
        return f"{self._container.container_name}/{name}"

    @translated(BLOB_STORAGE)
    def load(self, order_number: str) -> bytes:
        """The stored PDF, byte for byte. Raises ``ReceiptNotFound`` when there is none."""
        with self._lock:
            kept = self._recent.get(order_number)
        if kept is not None:
            return kept
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
