"""A job started and followed through the generic job API: ``POST /api/<route>`` with an
Idempotency-Key, then its status URL until it says what the test waits for."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from typing import Any

from localdev.api_client import AppClient
from tests import polling

from .stack import PipelineStack


def start(api: AppClient, route: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    """``POST /api/<route>``: 202, its Location the status URL it names."""
    response = api.request(
        "POST", route, body=dict(payload), headers={"Idempotency-Key": uuid.uuid4().hex}
    )
    assert response.status == 202, response.body
    started = dict(response.json())
    assert response.headers["Location"] == started["status_url"]
    return started


def status_when(
    api: AppClient, started: Mapping[str, Any], wanted: str, timeout: float = 60
) -> dict[str, Any]:
    """GET the job's status URL until its status is ``wanted``; the status document."""
    path = str(started["status_url"]).removeprefix(api.api_url + "/")

    def reached() -> dict[str, Any] | None:
        response = api.request("GET", path)
        assert response.status == 200, response.body
        document = dict(response.json())
        return document if document["status"] == wanted else None

    return dict(polling.wait_for(reached, timeout, f"job {started['job_id']} {wanted}", 0.3))


def tasks_run(stack: PipelineStack, job_id: str) -> list[str]:
    """The tasks the processor completed for the job, in the order its log says."""
    pattern = re.compile(rf"job={re.escape(job_id)} task=(\w+) step=\d+ outcome=completed\b")
    return [m.group(1) for line in stack.lines if (m := pattern.search(line))]
