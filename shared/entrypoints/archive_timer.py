"""The archive timer: moves dead letters of every session queue into Table Storage."""

from __future__ import annotations

import logging

import azure.functions as func

from ..bootstrap import container
from ..service_layer.dead_letters import archive_dead_letters as archive_service
from .timer_runs import recorded

logger = logging.getLogger(__name__)
bp = func.Blueprint()


@bp.timer_trigger(arg_name="timer", schedule="%DLQ_ARCHIVE_SCHEDULE%", use_monitor=True)
def archive_dead_letters(timer: func.TimerRequest) -> None:
    """Move dead letters of every session queue into Table Storage, bounded per run. Each run
    is recorded (``timer_runs``): a failing archive, and dead letters no run has emptied for
    too long, show on the overview."""
    c = container()
    if timer.past_due:
        logger.info("The archive run is late; it catches up now.")
    with recorded(c.timer_runs, "archive_dead_letters") as run:
        report = archive_service(
            c.dead_letter_source,
            c.archive,
            queues=c.session_queues,
            max_messages=c.settings.archive_max_messages,
            max_seconds=c.settings.archive_max_seconds,
            observers=c.queue_observers,
        )
        run.drained = not report.stopped_early
    logger.info(
        "archive_dead_letters moved %d dead letter(s) (%s) in %d transaction(s)%s",
        report.total,
        ", ".join(f"{queue}={count}" for queue, count in report.moved.items()),
        report.transactions,
        "; more are waiting for the next run" if report.stopped_early else "",
    )
