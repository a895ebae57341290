"""Product imports end to end: rows on the import queue (as the Spark job sends them), each
imported or dead-lettered on its own; a bad row never stops the rows after it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from shared.adapters.azure_clients import PRODUCTS_TABLE
from shared.adapters.table_products import TableProductCatalog

from .conftest import E2E, import_rows, wait_for

pytestmark = pytest.mark.e2e


def test_an_import_goes_on_past_bad_rows(e2e: E2E) -> None:
    job = f"import-{uuid.uuid4().hex[:8]}"
    session = f"{job}-0000"
    rows: list[dict[str, Any]] = [
        {"sku": f"{job}-1", "name": "Kettle", "price": "30.00", "currency": "EUR"},
        {"sku": f"{job}-2", "name": "No price", "price": None, "currency": "EUR"},
        {"sku": f"{job}-3", "name": "Cup", "price": "4.00", "currency": "EUR"},
        {"sku": f"{job}-4", "name": "Bad currency", "price": "1.00", "currency": "EURO"},
        {"sku": f"{job}-5", "name": "Saucer", "price": "3.00", "currency": "EUR"},
    ]

    status = import_rows(e2e, job, rows, expect_imported=3, session_id=session)

    assert status["rows_failed"] == 2
    found = TableProductCatalog(e2e.table(PRODUCTS_TABLE)).find([f"{job}-{i}" for i in range(1, 6)])
    stored = {step: f"{job}-{step}" in found for step in range(1, 6)}
    assert stored == {1: True, 2: False, 3: True, 4: False, 5: True}
    archived = wait_for(
        lambda: len(_archived_messages(e2e, session)) == 2 and _archived_messages(e2e, session),
        timeout=20,
        what="the two bad rows archived",
    )
    assert [(m["step"], m["reason"]) for m in archived] == [
        (2, "InvalidProduct:price"),
        (4, "InvalidProduct:currency"),
    ]
    assert all("Correct the row and import it again" in m["description"] for m in archived)


def _archived_messages(e2e: E2E, session_id: str) -> list[dict[str, Any]]:
    response = e2e.api.request("GET", f"failed-sessions/{session_id}")
    return list(response.json()["messages"]) if response.status == 200 else []
