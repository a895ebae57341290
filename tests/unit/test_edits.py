"""An edited message is checked like the one it replaces: JSON, a task message, the same
routing, a payload the pipeline accepts; the audit keeps what changed."""

from __future__ import annotations

import json

import pytest

from shared.domain.audit import Change
from shared.domain.edits import checked_edit
from shared.domain.errors import InvalidInput
from shared.domain.pipelines import import_message
from tests.builders import PIPELINES

ROW = {"sku": "TEA-X", "name": "Tea", "price": "4.50", "currency": "EURO", "description": ""}
CHECKS = PIPELINES.payload_check
ORIGINAL = import_message("job-1", 3, is_last=False, row=ROW).to_json()


def _edit(**changes: object) -> str:
    document = json.loads(ORIGINAL)
    document["payload"] = {**document["payload"], **changes}
    return json.dumps(document)


def test_a_corrected_currency_is_accepted_with_its_diff() -> None:
    body, changes = checked_edit(
        ORIGINAL, _edit(currency="EUR"), field="edits[0].body", payload_checks=CHECKS
    )
    assert json.loads(body)["payload"]["currency"] == "EUR"
    assert changes == (Change("replace", "/payload/currency", old="EURO", new="EUR"),)


@pytest.mark.parametrize(
    ("edited", "field"),
    [
        ("{not json", "m.body"),
        ('{"a": 1, "a": 2}', "m.body"),
        (json.dumps({"job_id": "job-1"}), "m.body.pipeline"),
        (_edit(currency="EU"), "m.body.payload.currency"),
        (_edit(price="free"), "m.body.payload.price"),
        (_edit().replace('"step": 3', '"step": 4'), "m.body.step"),
        (_edit().replace('"job_id": "job-1"', '"job_id": "job-2"'), "m.body.job_id"),
    ],
)
def test_an_edit_the_pipeline_would_refuse_is_refused_naming_the_field(
    edited: str, field: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        checked_edit(ORIGINAL, edited, field="m.body", payload_checks=CHECKS)
    assert refused.value.field == field


def test_an_unreadable_original_may_be_replaced_by_a_whole_task_message() -> None:
    body, changes = checked_edit(
        b'{"job_id": "x", "pipe', _edit(currency="EUR"), field="b", payload_checks=CHECKS
    )
    assert json.loads(body)["payload"]["currency"] == "EUR"
    assert changes == (Change("replace", "", old='{"job_id": "x", "pipe', new=json.loads(body)),)
