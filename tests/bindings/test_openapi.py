"""The OpenAPI document the app serves at GET /api/openapi.json: a valid OpenAPI 3.1 document
(openapi-spec-validator) that lists exactly the HTTP API the app registers, every method of
every route under /api, the generic start and status routes of each declared pipeline
included, and nothing the app does not serve."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import azure.functions as func
import pytest
from openapi_spec_validator import validate

from shared.bootstrap import Container, use_container
from shared.entrypoints.openapi import openapi_document
from shared.entrypoints.openapi_http import get_openapi
from tests.bindings.indexed_app import INDEXED
from tests.builders import APP_SETTINGS, PIPELINES, app_settings
from tests.examples.onboarding import PIPELINE as ONBOARDING


@pytest.fixture(autouse=True)
def container() -> Iterator[None]:
    use_container(Container(app_settings(APP_SETTINGS)))
    yield
    use_container(None)


def registered_routes() -> set[tuple[str, str]]:
    """(method, /route) of every HTTP function the app registers under /api."""
    routes = set()
    for function in INDEXED:
        for binding in json.loads(function.get_function_json())["bindings"]:
            if binding["type"] == "httpTrigger" and binding["route"].startswith("api/"):
                routes |= {(m.lower(), f"/{binding['route']}") for m in binding["methods"]}
    return routes


def documented(document: dict[str, Any]) -> set[tuple[str, str]]:
    return {(method, path) for path, item in document["paths"].items() for method in item}


def served() -> dict[str, Any]:
    response = get_openapi(
        func.HttpRequest(method="GET", url="http://localhost:7071/api/openapi.json", body=b"")
    )
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    return dict(json.loads(response.get_body()))


def test_the_served_document_is_valid_openapi_and_lists_exactly_the_registered_routes() -> None:
    document = served()

    validate(document)
    assert documented(document) == registered_routes()
    assert document["servers"] == [{"url": "http://localhost:7071"}]  # PUBLIC_BASE_URL


def test_each_operation_is_the_function_that_serves_it() -> None:
    names = {str(f.get_function_name()) for f in INDEXED}
    operations = {op["operationId"] for item in served()["paths"].values() for op in item.values()}
    assert operations <= names, sorted(operations - names)


def test_a_declared_pipeline_with_a_route_gets_the_generic_job_api_in_the_document() -> None:
    document = openapi_document([*PIPELINES, ONBOARDING])

    validate(document)
    start = document["paths"]["/api/onboardings"]["post"]
    status = document["paths"]["/api/onboardings/{job_id}"]["get"]
    assert "CreateAccount, ProvisionWorkspace, SendWelcomeEmail" in start["description"]
    assert {p["name"] for p in start["parameters"]} == {"Idempotency-Key"}
    assert set(start["responses"]) == {"202", "400", "409", "413", "422"}
    assert status["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/JobStatus"
    }
    job = document["components"]["schemas"]["JobStatus"]["properties"]
    assert {"tasks", "failed", "outputs", "sessions"} <= set(job)


def test_a_pipeline_whose_own_module_serves_its_route_adds_nothing() -> None:
    own = replace(ONBOARDING, own_routes=True)
    assert documented(openapi_document([own])) == documented(openapi_document([]))
