"""What a process's telemetry is (``Telemetry``) and where it goes (``ExportPlan``): the types
that ``setup`` decides from the environment and ``exporters`` builds with the SDK, which reads
nothing but the plan."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from .metrics import PipelineMetrics

INSTRUMENTATION_NAME = "shared.telemetry"


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class Telemetry:
    """The tracer and instruments of this process; all None when nothing is exported.
    ``exporting`` names the destinations (``azure-monitor``, ``otlp``)."""

    tracer: Tracer | None = None
    metrics: PipelineMetrics | None = None
    exporting: tuple[str, ...] = ()
    flush: Callable[[], None] = field(default=_nothing, repr=False)
    shutdown: Callable[[], None] = field(default=_nothing, repr=False)


DISABLED = Telemetry()


DEFAULT_SERVICE_NAME = "servicebus-session-pipelines"


@dataclass(frozen=True)
class ExportPlan:
    """Where telemetry goes and how it is named and sampled; empty when nowhere.

    ``otlp_signal_endpoints``: a signal's own OTLP URL by signal (``traces``, ``metrics``,
    ``logs``) where one is set, winning over ``<otlp_endpoint>/v1/<signal>``.
    ``sampling_ratio``: the ratio of Application Insights' fixed-percentage sampler, or None
    when the SDK picks its sampler itself. ``service_name``: empty for the default."""

    connection_string: str = ""
    otlp_endpoint: str = ""
    distro_configured_by_worker: bool = False
    otlp_signal_endpoints: Mapping[str, str] = field(default_factory=dict)
    sampling_ratio: float | None = None
    service_name: str = ""

    @property
    def exports(self) -> bool:
        return bool(self.connection_string or self.otlp_endpoint)

    def otlp_url(self, signal: str) -> str:
        """Where the OTLP exporter of ``signal`` sends."""
        return self.otlp_signal_endpoints.get(signal) or f"{self.otlp_endpoint}/v1/{signal}"
