"""The pipeline's metrics. Names, units and attributes are listed in docs/telemetry.md."""

from __future__ import annotations

from opentelemetry.metrics import Meter

# Seconds, from 5 ms to a minute: a task is a table write or two, or a PDF and an e-mail.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class PipelineMetrics:
    """The instruments, created once per process from ``meter``."""

    def __init__(self, meter: Meter) -> None:
        self.sessions_completed = meter.create_counter(
            "pipeline.sessions.completed",
            unit="{session}",
            description="Sessions (for the purchase pipeline: orders) whose last task completed.",
        )
        self.sessions_failed = meter.create_counter(
            "pipeline.sessions.failed",
            unit="{session}",
            description="Sessions marked failed, by the task that failed and its reason.",
        )
        self.sessions_in_flight = meter.create_up_down_counter(
            "pipeline.sessions.in_flight",
            unit="{session}",
            description="Sessions whose first message was handled and whose last was not yet.",
        )
        self.task_duration = meter.create_histogram(
            "pipeline.task.duration",
            unit="s",
            description="One task invocation, from receipt to settlement, by task and outcome.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.dead_letters_archived = meter.create_counter(
            "pipeline.dead_letters.archived",
            unit="{message}",
            description="Dead letters copied into the archive and removed from the queue.",
        )
        self.replays_sent = meter.create_counter(
            "pipeline.replays.sent",
            unit="{message}",
            description="Archived messages sent again as a replay session.",
        )
