"""How each timer function's run is recorded (``TimerRuns``), for the overview's alerts: when it
started, ended well (and whether it left work for the next run) or failed. A run that fails
is also logged at ERROR as ``<timer> failed: <error>``, the line the Azure alert on the archive
timer looks for (infra/app/alerts.bicep), and raised again, so the host counts the invocation
failed. Recording is best effort: a record that cannot be written is a warning, never the
run's failure."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ..service_layer.clock import utc_now
from ..service_layer.operator_ports import TimerRuns

logger = logging.getLogger(__name__)


@dataclass
class Run:
    """Set ``drained`` False when the run left work for the next one."""

    drained: bool = True


@contextmanager
def recorded(runs: TimerRuns, timer: str) -> Iterator[Run]:
    started = utc_now().isoformat()
    _best_effort(lambda: runs.started(timer, started))
    run = Run()
    try:
        yield run
    except Exception as error:
        reason = f"{error.__class__.__name__}: {error}"
        logger.error("%s failed: %s", timer, reason)
        _best_effort(lambda: runs.failed(timer, utc_now().isoformat(), reason))
        raise
    ended = utc_now().isoformat()
    _best_effort(lambda: runs.succeeded(timer, ended, started_at=started, drained=run.drained))


def _best_effort(write: Callable[[], None]) -> None:
    try:
        write()
    except Exception as error:
        logger.warning("Could not record the timer's run: %s", error)
