"""What a task's (or a bookkeeping write's) exception means to the processor: its reason (the
dead-letter reason if it is given up on), a description for a person, whether trying again
may help, and what was out of reach."""

from __future__ import annotations

from dataclasses import dataclass

from ..domain.errors import PipelineError, ServiceUnavailable, TaskFailed
from ..domain.reasons import UNHANDLED_ERROR


@dataclass(frozen=True)
class TaskError:
    reason: str
    description: str
    retryable: bool
    # What could not be reached (a service, a provider): the failure counts towards the
    # pipeline's circuit. None for a failure that says nothing about an outage.
    dependency: str | None = None
    expected: bool = True  # False: a bug or an error nothing translated, logged with its trace


def task_error(error: Exception) -> TaskError:
    """A ``TaskFailed`` as it says; a ``ServiceUnavailable`` from an adapter (Storage or
    Service Bus out of reach, throttling, a server error) as a transient failure of that
    service; anything else as ``UnhandledError``, retried like a transient failure (a bug or
    an outage nothing translated)."""
    if isinstance(error, TaskFailed):
        dependency = getattr(error, "dependency", None)
        return TaskError(error.reason, error.description, error.retryable, dependency)
    if isinstance(error, ServiceUnavailable):
        return TaskError(error.reason, str(error), True, error.dependency)
    if isinstance(error, PipelineError) and error.retryable:
        return TaskError(type(error).__name__, str(error), True)
    return TaskError(UNHANDLED_ERROR, f"{type(error).__name__}: {error}", True, expected=False)
