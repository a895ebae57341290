"""Pausing and resuming a pipeline through the API, as the worker calls it, on a real Azurite:
the pause is stored (every instance sees it), shown on the overview and the pipelines' list,
audited with its caller and note; a refusal names the field before anything is done."""

from __future__ import annotations

import json
from typing import Any

import azure.functions as func
import pytest

from shared.bootstrap import container
from shared.domain.audit import key_holder
from shared.domain.pipelines import PRODUCT_IMPORT, PURCHASE
from shared.entrypoints.overview_http import get_overview
from shared.entrypoints.pipeline_controls_http import (
    get_pipeline,
    list_pipelines,
    pause_pipeline,
    resume_pipeline,
)

from .conftest import StorageApp
from .test_dead_letters import _get, _json, _post, assert_problem

pytestmark = pytest.mark.integration

KEY = {"x-functions-key": "the-host-key"}


def act(function: Any, pipeline: str, document: Any) -> func.HttpResponse:
    action = "pause" if function is pause_pipeline else "resume"
    return _post(
        function,
        f"pipelines/{pipeline}/{action}",
        body=json.dumps(document).encode(),
        headers=KEY,
        pipeline=pipeline,
    )


def states() -> dict[str, Any]:
    response = _get(list_pipelines, "pipelines")
    assert response.status_code == 200
    return {p["pipeline"]: p for p in _json(response)["pipelines"]}


def test_a_paused_pipeline_is_shown_everywhere_and_audited_until_it_is_resumed(
    storage_app: StorageApp,
) -> None:
    assert states()[PURCHASE]["paused"] is None

    paused = act(pause_pipeline, PURCHASE, {"note": "Storage failover"})

    assert paused.status_code == 200
    pause = _json(paused)["paused"]
    assert (pause["cause"], pause["by"], pause["note"]) == (
        "manual",
        key_holder("the-host-key"),
        "Storage failover",
    )
    assert pause["summary"].startswith(f"paused by {key_holder('the-host-key')} since ")
    assert states()[PURCHASE]["paused"] == pause
    assert states()[PRODUCT_IMPORT]["paused"] is None
    # the stored pause, as another instance reads it
    stored = storage_app.container.pipeline_pauses.find(PURCHASE)
    assert stored is not None and stored.note == "Storage failover"
    overview = _json(_get(get_overview, "overview"))
    [purchase] = [p for p in overview["pipelines"] if p["pipeline"] == PURCHASE]
    assert purchase["paused"] == pause

    resumed = act(resume_pipeline, PURCHASE, {"note": "failover done"})

    assert resumed.status_code == 200 and _json(resumed)["paused"] is None
    assert storage_app.container.pipeline_pauses.find(PURCHASE) is None
    history = _json(_get(get_pipeline, f"pipelines/{PURCHASE}", pipeline=PURCHASE))["history"]
    assert [(h["action"], h["who"], h["note"]) for h in history] == [
        ("pause", key_holder("the-host-key"), "Storage failover"),
        ("resume", key_holder("the-host-key"), "failover done"),
    ]


def test_pausing_a_paused_pipeline_keeps_the_first_pause_and_records_it_once(
    storage_app: StorageApp,
) -> None:
    act(pause_pipeline, PURCHASE, {"note": "first"})

    again = act(pause_pipeline, PURCHASE, {"note": "second"})

    assert _json(again)["paused"]["note"] == "first"
    history = container().pipeline_controls.history(PURCHASE)
    assert [(h.action, h.note) for h in history] == [("pause", "first")]
    act(resume_pipeline, PURCHASE, {"note": "done"})
    resumed_twice = act(resume_pipeline, PURCHASE, {"note": "done again"})
    assert resumed_twice.status_code == 200
    assert [h.action for h in container().pipeline_controls.history(PURCHASE)] == [
        "pause",
        "resume",
    ]


@pytest.mark.parametrize(
    ("pipeline", "document", "status", "field"),
    [
        ("newsletter", {"note": "x"}, 404, None),
        (PURCHASE, {}, 400, "note"),
        (PURCHASE, {"note": "   "}, 400, "note"),
        (PURCHASE, {"note": 7}, 400, "note"),
        (PURCHASE, {"note": "x" * 2001}, 400, "note"),
        (PURCHASE, {"note": "x", "until": "noon"}, 400, "until"),
    ],
)
def test_a_refused_pause_names_what_to_fix_and_pauses_nothing(
    storage_app: StorageApp, pipeline: str, document: Any, status: int, field: str | None
) -> None:
    problem = assert_problem(act(pause_pipeline, pipeline, document), status)

    if field:
        assert problem["errors"][0]["field"] == field
    else:
        assert PURCHASE in problem["detail"] and PRODUCT_IMPORT in problem["detail"]
    assert storage_app.container.pipeline_pauses.find(PURCHASE) is None
