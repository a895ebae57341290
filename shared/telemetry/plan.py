"""What a process's telemetry is (``Telemetry``) and where it goes (``ExportPlan``): the types
that ``setup`` decides from the environment and ``exporters`` builds with the SDK."""

from __future__ import annotations

from collections.abc import Callable
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


@dataclass(frozen=True)
class ExportPlan:
    """Where telemetry goes; empty when nowhere."""

    connection_string: str = ""
    otlp_endpoint: str = ""
    distro_configured_by_worker: bool = False

    @property
    def exports(self) -> bool:
        return bool(self.connection_string or self.otlp_endpoint)
