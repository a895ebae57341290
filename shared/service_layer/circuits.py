"""Whether a pipeline's tasks may run now, per process: not while an operator has paused the
pipeline; while its circuit is open, one task at a time (the probe).

A pipeline's circuit opens after ``threshold`` transient failures in a row on one dependency
(Table Storage, Blob Storage, Service Bus, the payment provider), from at least two sessions
(one bad session cannot pause the others), with no task of the pipeline succeeding in between
(for Service Bus, which tasks do not use: no state or settlement request succeeding). While it
is open, a task runs only as the probe: one at a time, the first one after the previous probe
failed waiting a backoff (``RetryPolicy.backoff`` of the failed probes, up to its cap); every
other session waits, holding its message (``shared.service_layer.holding``) without trying.
The first task that succeeds closes the circuit (open on Service Bus: the first state or
settlement request that succeeds). The circuit lives in the process (each worker process and
instance has its own): what it knows is what this process's tasks met, and it needs nothing
that an outage could take away.

A manual pause is stored (``PipelinePauses``) so that every process sees it: each gate reads it
at most once per ``pause_ttl`` seconds, keeping what it last read when the store cannot be
reached. Opening and closing are logged (logger ``shared.service_layer.circuits``) and shown
by ``paused()`` (the overview, the ``pipeline.paused`` metric).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from ..domain.errors import SERVICE_BUS, PipelineError
from ..domain.pauses import CIRCUIT, ManualPause, Paused, manually_paused
from ..domain.retries import DEFAULT_CIRCUIT_THRESHOLD, RetryPolicy
from .clock import Clock, utc_now
from .operator_ports import PipelinePauses

logger = logging.getLogger(__name__)

# A probe that has not reported back after this long (its invocation died) lets another go.
PROBE_TIMEOUT_SECONDS = 120.0


@dataclass
class _Failures:
    count: int = 0
    sessions: set[str] = field(default_factory=set)


class Circuit:
    """One pipeline's circuit in this process."""

    def __init__(
        self,
        pipeline: str,
        *,
        threshold: int = DEFAULT_CIRCUIT_THRESHOLD,
        probes: RetryPolicy | None = None,
        clock: Clock = utc_now,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if threshold < 1:
            raise ValueError("threshold must be at least 1")
        self.pipeline = pipeline
        self._threshold = threshold
        self._probes = probes or RetryPolicy()
        self._clock = clock
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._failures: dict[str, _Failures] = {}
        self._open: Paused | None = None
        self._failed_probes = 0
        self._next_probe = 0.0
        self._probe: tuple[str, float] | None = None  # (session, since)

    def state(self) -> Paused | None:
        """Why the circuit is open, or None when it is closed."""
        with self._lock:
            return self._open

    def admit(self, session_id: str) -> bool:
        """May this session's task run now? Always while closed; while open, when no probe
        is out and the next one is due, and the caller then is the probe."""
        with self._lock:
            if self._open is None:
                return True
            now = self._monotonic()
            if self._probe is not None:
                session, since = self._probe
                if session == session_id:
                    return True
                if now - since < PROBE_TIMEOUT_SECONDS:
                    return False
            if now < self._next_probe:
                return False
            self._probe = (session_id, now)
            return True

    def succeeded(self, session_id: str) -> None:
        """A task of the session ran (or failed for a reason of its own, which is an answer
        too): the dependencies tasks use answer, and the circuit closes unless it is open on
        Service Bus, which tasks do not use (``reached`` closes that one)."""
        with self._lock:
            if self._probe is not None and self._probe[0] == session_id:
                self._probe = None
            for dependency in list(self._failures):
                if dependency != SERVICE_BUS:
                    del self._failures[dependency]
            opened = self._open
            if opened is None or opened.dependency == SERVICE_BUS:
                return
        self._close(opened)

    def reached(self, dependency: str) -> None:
        """A request to ``dependency`` succeeded (Service Bus, for the state or a
        settlement): its failures are forgotten, and a circuit open on it closes."""
        with self._lock:
            self._failures.pop(dependency, None)
            opened = self._open
            if opened is None or opened.dependency != dependency:
                return
        self._close(opened)

    def _close(self, opened: Paused) -> None:
        with self._lock:
            if self._open is not opened:
                return
            self._open = None
            self._probe = None
            self._failed_probes = 0
            self._failures.clear()
        logger.info(
            'pipeline=%s resumed cause=circuit dependency="%s" paused_since=%s',
            self.pipeline,
            opened.dependency,
            opened.since,
        )

    def failed(self, session_id: str, dependency: str | None) -> None:
        """A task failed transiently. With a ``dependency`` it counts towards opening the
        circuit (and a failed probe waits its backoff before the next); without, it only lets
        the probe go."""
        opened: Paused | None = None
        with self._lock:
            if self._probe is not None and self._probe[0] == session_id:
                self._probe = None
                if dependency is not None:
                    self._failed_probes += 1
                    self._next_probe = self._monotonic() + self._probes.backoff(self._failed_probes)
            if dependency is None or self._open is not None:
                return
            failures = self._failures.setdefault(dependency, _Failures())
            failures.count += 1
            failures.sessions.add(session_id)
            enough = failures.count >= self._threshold
            if enough and (len(failures.sessions) >= 2 or self._threshold == 1):
                opened = self._open = Paused(
                    self.pipeline, CIRCUIT, self._clock().isoformat(), dependency=dependency
                )
                self._failed_probes = 1
                self._next_probe = self._monotonic() + self._probes.backoff(1)
                self._failures.clear()
        if opened is not None:
            logger.warning(
                'pipeline=%s paused cause=circuit dependency="%s" since=%s: %d transient '
                "failures in a row from %d sessions; one task at a time until one succeeds",
                self.pipeline,
                dependency,
                opened.since,
                failures.count,
                len(failures.sessions),
            )


class PipelineGate:
    """A pipeline's manual pause and circuit, as its processor and the overview ask about
    them in this process."""

    def __init__(
        self,
        circuit: Circuit,
        pauses: PipelinePauses | None = None,
        *,
        pause_ttl: float = 5.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pipeline = circuit.pipeline
        self.circuit = circuit
        self._pauses = pauses
        self._ttl = pause_ttl
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._manual: ManualPause | None = None
        self._read_at: float | None = None

    def admit(self, session_id: str) -> bool:
        """May this session's task run now (``Circuit.admit``, and not manually paused)?"""
        if self.manual() is not None:
            return False
        return self.circuit.admit(session_id)

    def paused(self) -> Paused | None:
        """Why the pipeline is paused now: an operator's pause first, else its circuit."""
        manual = self.manual()
        if manual is not None:
            return manually_paused(self.pipeline, manual)
        return self.circuit.state()

    def manual(self) -> ManualPause | None:
        """The operator's pause, read at most once per ``pause_ttl`` seconds."""
        if self._pauses is None:
            return None
        now = self._monotonic()
        with self._lock:
            fresh = self._read_at is not None and now - self._read_at < self._ttl
            if fresh:
                return self._manual
            self._read_at = now  # one reader at a time; the others keep the last value
        try:
            manual = self._pauses.find(self.pipeline)
        except PipelineError as error:
            if not error.retryable:
                raise
            logger.debug("pipeline=%s pause not read: %s", self.pipeline, error)
            with self._lock:
                return self._manual
        self.known(manual)
        return manual

    def known(self, manual: ManualPause | None) -> None:
        """The pause as this process has just written or read it."""
        with self._lock:
            self._manual = manual
            self._read_at = self._monotonic()


class Gates(Mapping[str, PipelineGate]):
    """The gates of the process's pipelines, by pipeline name."""

    def __init__(self, gates: Iterable[PipelineGate]) -> None:
        self._gates = {gate.pipeline: gate for gate in gates}

    def __getitem__(self, pipeline: str) -> PipelineGate:
        return self._gates[pipeline]

    def __iter__(self) -> Iterator[str]:
        return iter(self._gates)

    def __len__(self) -> int:
        return len(self._gates)

    def paused(self) -> dict[str, Paused]:
        """Every paused pipeline, by name."""
        return {name: p for name, gate in self._gates.items() if (p := gate.paused()) is not None}

    def readings(self) -> dict[str, tuple[str, str] | None]:
        """Each pipeline's pause as the ``pipeline.paused`` gauge reports it: (cause,
        dependency), or None while it runs."""
        paused = self.paused()
        return {
            name: (p.cause, p.dependency or "") if (p := paused.get(name)) else None
            for name in self._gates
        }
