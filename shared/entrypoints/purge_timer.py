"""The purge timer: deletes what outlived its lifetime (docs/capacity.md, "Retention"), on the
``PURGE_SCHEDULE``, bounded per run by ``PURGE_MAX_SECONDS``."""

from __future__ import annotations

import logging

import azure.functions as func

from ..bootstrap import container
from ..service_layer.clock import utc_now
from ..service_layer.retention import purge_expired
from .timer_runs import recorded

logger = logging.getLogger(__name__)
bp = func.Blueprint()


@bp.timer_trigger(arg_name="timer", schedule="%PURGE_SCHEDULE%", use_monitor=True)
def purge_expired_records(timer: func.TimerRequest) -> None:
    """Delete the records past their lifetime, in batches, never what a replay or a running
    job still needs; a run cut short by its budget is carried on by the next."""
    c = container()
    with recorded(c.timer_runs, "purge_expired_records") as run:
        report = purge_expired(
            c.retention,
            c.archive,
            c.settings.retention,
            now=utc_now(),
            max_seconds=c.settings.purge_max_seconds,
        )
        run.drained = not report.stopped_early
    logger.info(
        "purge_expired_records deleted %d row(s) and blob(s)%s%s",
        report.total,
        f" ({', '.join(f'{where}={n}' for where, n in sorted(report.deleted.items()))})"
        if report.deleted
        else "",
        "; more are expired: the next run goes on" if report.stopped_early else "",
    )
