"""Requests that run once per Idempotency-Key (``shared.domain.idempotency`` has the rules).

The first request with a key inserts its record, in flight, and runs; when it succeeds its
result is stored and every repeat with the same fingerprint gets that result without running
anything (a result that cannot be stored is still the answer: the key stays in flight until
its lease ends); when it fails the record is deleted, so the key can be tried again. The
insert is the lock: of concurrent requests with one key exactly one runs, the others are
refused with ``IdempotencyKeyInFlight`` (409). A record left in flight longer than ``lease``
(its request died) is taken over by the next request with the key, conditionally on its ETag,
so again exactly one runs; the request that takes it over runs ``resume`` when given (what to
do when the action may have run in part).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from ..domain.errors import PipelineError
from ..domain.idempotency import IdempotencyKeyInFlight, IdempotencyKeyReused, IdempotencyRecord
from .clock import Clock, utc_now
from .ports import IdempotencyRecords

logger = logging.getLogger(__name__)

# Longer than any request may run: the Functions host answers an HTTP request within 230 s.
LEASE = timedelta(minutes=5)

Result = Mapping[str, Any]


class IdempotentRequests:
    def __init__(
        self,
        records: IdempotencyRecords,
        *,
        lease: timedelta = LEASE,
        clock: Clock = utc_now,
    ) -> None:
        self._records = records
        self._lease = lease
        self._clock = clock

    def run(
        self,
        scope: str,
        key: str,
        fingerprint: str,
        action: Callable[[], Result],
        *,
        resume: Callable[[], Result] | None = None,
    ) -> Result:
        """``action()``'s result, or the stored result of the first request with ``key`` in
        ``scope``; ``resume()``'s in place of ``action()``'s when the key's record is taken
        over from a request that died in flight. Raises ``IdempotencyKeyReused`` (another
        fingerprint) or ``IdempotencyKeyInFlight``; whatever the action raises is raised after
        the key is released."""
        now = self._clock()
        mine = IdempotencyRecord(fingerprint=fingerprint, started_at=now.isoformat())
        created, record = self._records.start(scope, key, mine)
        if not created:
            if record.fingerprint != fingerprint:
                raise IdempotencyKeyReused(key)
            if record.result is not None:
                return record.result
            if now - datetime.fromisoformat(record.started_at) < self._lease:
                raise IdempotencyKeyInFlight(key, record.started_at)
            taken = self._records.take_over(scope, key, record, mine)
            if taken is None:  # another request took it over first
                raise IdempotencyKeyInFlight(key, record.started_at)
            logger.warning("Took over %s key %r, in flight since %s", scope, key, record.started_at)
            record = taken
            action = resume or action
        try:
            result = action()
        except BaseException:
            # The key stays in flight until the lease ends if the store cannot be reached.
            with contextlib.suppress(PipelineError):
                self._records.release(scope, key, record)
            raise
        try:
            self._records.finish(scope, key, replace(record, result=dict(result)))
        except PipelineError as error:
            if not error.retryable:
                raise
            # The action happened: its result is the answer. A repeat gets 409 until the
            # key's lease ends, then takes the key over and runs the action again, which
            # repeats nothing (a job's ids derive from the key: duplicate detection).
            logger.warning("The result of %s key %r could not be stored: %s", scope, key, error)
        return result
