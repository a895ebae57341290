"""A bulk replay request and its progress."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from .errors import PipelineError


class ReplayRequestNotFound(PipelineError):
    def __init__(self, request_id: str) -> None:
        super().__init__(f"There is no replay request {request_id!r}.")
        self.request_id = request_id


@dataclass(frozen=True)
class ReplayRequest:
    request_id: str
    queue: str | None
    task: str | None
    reason: str | None
    status: Literal["queued", "running", "completed", "failed"] = "queued"
    found: int = 0
    sent: int = 0
    failed: int = 0
    errors: tuple[dict[str, str], ...] = field(default_factory=tuple)
    failure: str | None = None
    created_at: str = ""
    updated_at: str = ""
