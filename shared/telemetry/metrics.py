"""The pipeline's metrics. Names, units and attributes are listed in docs/telemetry.md."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from opentelemetry.metrics import CallbackOptions, Meter, Observation

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
    "pipeline.paused": (
        "1 while a pipeline is paused in this process (by its circuit or an operator), else 0."
    ),
}

# A pipeline's pause as the gauge reports it: (cause, dependency), or None while it runs.
PauseReading = tuple[str, str] | None


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
        self._pauses: list[Callable[[], Mapping[str, PauseReading]]] = []
        self.paused = meter.create_observable_gauge(
            "pipeline.paused",
            callbacks=[self._observe_paused],
            unit="{pipeline}",
            description=DESCRIPTIONS["pipeline.paused"],
        )

    def observe_paused(self, read: Callable[[], Mapping[str, PauseReading]]) -> None:
        """Report ``read()``'s pipelines on the ``pipeline.paused`` gauge at each collection."""
        self._pauses.append(read)

    def _observe_paused(self, options: CallbackOptions) -> Iterable[Observation]:
        for read in self._pauses:
            for pipeline, pause in read().items():
                cause, dependency = pause or ("", "")
                attributes = {"pipeline": pipeline, "cause": cause, "dependency": dependency}
                yield Observation(1 if pause else 0, attributes)
