"""The pipeline's metrics. Names, units and attributes are listed in docs/telemetry.md."""

from __future__ import annotations

from opentelemetry.metrics import Meter

# Seconds, from 5 ms to a minute: a task is a table write or two, or a PDF and an e-mail.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

# What each instrument counts or measures, by its name.
DESCRIPTIONS = {
    "pipeline.sessions.completed": (
        "Sessions (for the purchase pipeline: orders) whose last task completed."
    ),
    "pipeline.sessions.failed": "Sessions marked failed, by the task that failed and its reason.",
    "pipeline.sessions.in_flight": (
        "Sessions whose first message was handled and whose last was not yet."
    ),
    "pipeline.task.duration": (
        "One task invocation, from receipt to settlement, by task and outcome."
    ),
    "pipeline.dead_letters.archived": (
        "Dead letters copied into the archive and removed from the queue."
    ),
    "pipeline.replays.sent": "Archived messages sent again as a replay session.",
    "storage.requests": (
        "HTTP requests to Storage, retries included, by table, container or queue and by kind."
    ),
}


class PipelineMetrics:
    """The instruments, created once per process from ``meter``."""

    def __init__(self, meter: Meter) -> None:
        def sessions(name: str) -> dict[str, str]:
            return {"name": name, "unit": "{session}", "description": DESCRIPTIONS[name]}

        def messages(name: str) -> dict[str, str]:
            return {"name": name, "unit": "{message}", "description": DESCRIPTIONS[name]}

        self.sessions_completed = meter.create_counter(**sessions("pipeline.sessions.completed"))
        self.sessions_failed = meter.create_counter(**sessions("pipeline.sessions.failed"))
        self.sessions_in_flight = meter.create_up_down_counter(
            **sessions("pipeline.sessions.in_flight")
        )
        self.task_duration = meter.create_histogram(
            "pipeline.task.duration",
            unit="s",
            description=DESCRIPTIONS["pipeline.task.duration"],
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.dead_letters_archived = meter.create_counter(
            **messages("pipeline.dead_letters.archived")
        )
        self.replays_sent = meter.create_counter(**messages("pipeline.replays.sent"))
        self.storage_requests = meter.create_counter(
            "storage.requests", unit="{request}", description=DESCRIPTIONS["storage.requests"]
        )
