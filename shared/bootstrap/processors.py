"""The session processor of each declared pipeline, built from the container's parts on
first use, and the pipelines' pauses and circuits (``Gates``) they wait on."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol, TypeVar

from ..config import Settings
from ..service_layer.circuits import Circuit, Gates, PipelineGate
from ..service_layer.operator_ports import PipelinePauses
from ..service_layer.ports import Archive, SessionOutcomes
from ..service_layer.processor import SessionProcessor
from ..telemetry.setup import telemetry
from .wiring import AppPipelines, Wired

T = TypeVar("T")


class ProcessorParts(Protocol):
    """What building the processors takes from the container (``root.Container``)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def pipelines(self) -> AppPipelines: ...
    @property
    def gates(self) -> Gates: ...
    @property
    def archive(self) -> Archive: ...
    @property
    def session_outcomes(self) -> SessionOutcomes: ...
    @property
    def pipeline_pauses(self) -> PipelinePauses: ...

    def part(self, name: str, build: Callable[[], T]) -> T: ...

    def has_part(self, name: str) -> bool: ...

    def get_part(self, name: str) -> Any: ...

    def table(self, name: str) -> Any: ...


class Processors(Mapping[str, SessionProcessor]):
    """The declared pipelines' processors, each built (its tasks and their clients) when it is
    first asked for: an instance that only imports never loads the purchase's PDF renderer,
    and an import's first batch does not wait for it."""

    def __init__(self, c: ProcessorParts) -> None:
        self._container = c
        self._pipelines = {w.pipeline.name: w for w in c.pipelines.wired}

    def __getitem__(self, name: str) -> SessionProcessor:
        wired = self._pipelines[name]
        return self._container.part(f"processor {name}", lambda: _processor(self._container, wired))

    def __iter__(self) -> Iterator[str]:
        return iter(self._pipelines)

    def __len__(self) -> int:
        return len(self._pipelines)


def pipeline_gates(c: ProcessorParts) -> Gates:
    """Each declared pipeline's pause and circuit in this process, by the pipeline's name."""
    gates = Gates(
        PipelineGate(
            Circuit(
                p.name,
                threshold=c.settings.circuit_threshold,
                probes=c.settings.retry(p.retry),
            ),
            c.pipeline_pauses,
        )
        for p in c.pipelines.declared
    )
    metrics = telemetry().metrics
    if metrics is not None:
        metrics.observe_paused(gates.readings)
    return gates


def _processor(c: ProcessorParts, wired: Wired) -> SessionProcessor:
    pipeline = wired.pipeline
    return SessionProcessor(
        pipeline=pipeline.name,
        tasks=wired.tasks(c),
        policy=pipeline.policy,
        retry=c.settings.retry(pipeline.retry),
        gate=c.gates[pipeline.name],
        hold_seconds=c.settings.task_hold_seconds,
        journal=c.archive,
        observer=wired.observer(c),
        outcomes=c.session_outcomes,
        batch_tasks=wired.batch_tasks(c),
        shows=pipeline.shows,
    )
