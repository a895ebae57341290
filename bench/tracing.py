"""The pipeline bench's tracing switch, and what the stack exported when it was on.

"on": the stack's environment names an OTLP/HTTP endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT``),
a ``localdev.otlp_receiver`` this process starts on 127.0.0.1 (a free port) for the run and
stops after it, so the app exports its traces, metrics and logs as it would to a collector.
"off": neither that variable nor ``APPLICATIONINSIGHTS_CONNECTION_STRING`` is in the stack's
environment, so the app exports nothing and never loads the OpenTelemetry SDK (the default of
``make up``).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from localdev.otlp_receiver import OtlpReceiver, run_otlp_receiver
from shared.telemetry.setup import CONNECTION_STRING, OTLP_ENDPOINT

MODES = ("off", "on")
# After the last receipt, the CPU of a run is read again this much later, in both modes: the
# batch span processor exports every 5 s (OTEL_BSP_SCHEDULE_DELAY), so the export of the run's
# last spans is counted in "on", and the same idle time in "off".
EXPORT_DRAIN_SECONDS = 6.0


@dataclass
class Tracing:
    """One run's switch: the stack's environment, and the receiver when tracing is on."""

    mode: str
    environ: dict[str, str]
    receiver: OtlpReceiver | None = None
    _requests_before: int = field(default=0, repr=False)
    _logs_before: int = field(default=0, repr=False)

    def mark(self) -> None:
        """Where the measured part of the run starts, for ``exported``."""
        if self.receiver is not None:
            self._requests_before = len(self.receiver.requests)
            self._logs_before = len(self.receiver.logs())

    def exported(self, job_ids: Collection[str], orders: int) -> Exported | None:
        """What reached the receiver for the orders ``job_ids`` (``orders`` of them mailed),
        once the count of their spans has stopped growing; None when tracing is off."""
        if self.receiver is None:
            return None
        traces = _settled_traces(self.receiver, set(job_ids))
        spans = [s for s in self.receiver.spans() if s.trace_id in traces]
        logs = self.receiver.logs()[self._logs_before :]
        sent = self.receiver.requests[self._requests_before :]
        return Exported(
            orders=orders,
            spans=len(spans),
            by_name=dict(Counter(s.name for s in spans)),
            log_records=len(logs),
            log_records_in_traces=sum(1 for r in logs if r.trace_id in traces),
            by_logger=dict(Counter(r.logger for r in logs)),
            requests=len(sent),
            kilobytes=sum(size for _, _, size in sent) / 1000,
        )


@dataclass(frozen=True)
class Exported:
    """Spans in the traces of the measured orders; from the first POST on, the log records
    (all, and those in the orders' traces) and the OTLP requests (all signals) with their
    protobuf kilobytes."""

    orders: int
    spans: int
    by_name: dict[str, int]
    log_records: int
    log_records_in_traces: int
    by_logger: dict[str, int]
    requests: int
    kilobytes: float

    def per_order(self, value: float) -> float:
        return value / self.orders if self.orders else 0.0


@contextmanager
def tracing(mode: str) -> Iterator[Tracing]:
    if mode not in MODES:
        raise ValueError(f"tracing is one of {', '.join(MODES)}, not {mode!r}")
    environ = {k: v for k, v in os.environ.items() if k not in (CONNECTION_STRING, OTLP_ENDPOINT)}
    if mode == "off":
        yield Tracing(mode, environ)
        return
    with run_otlp_receiver() as receiver:
        yield Tracing(mode, {**environ, OTLP_ENDPOINT: receiver.endpoint}, receiver)


def _settled_traces(receiver: OtlpReceiver, job_ids: set[str], timeout: float = 30.0) -> set[str]:
    """The trace ids of the orders ``job_ids`` (their task spans carry ``session.id``), once
    the number of spans in them is the same twice, 1.5 s apart (or after ``timeout``)."""
    deadline = time.monotonic() + timeout
    previous = -1
    while True:
        spans = receiver.spans()
        traces = {s.trace_id for s in spans if s.attributes.get("session.id") in job_ids}
        count = sum(1 for s in spans if s.trace_id in traces)
        if count == previous or time.monotonic() > deadline:
            return traces
        previous = count
        time.sleep(1.5)
