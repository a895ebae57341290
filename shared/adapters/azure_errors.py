"""The Azure SDKs' exceptions as the app's own errors, in one place.

Adapter methods that the services call run inside ``azure_errors(service)`` (or are decorated
with ``translated(service)``): a connection failure, a timeout, throttling or a server error
becomes ``ServiceUnavailable`` (retryable); a session lock held elsewhere becomes
``SessionLocked`` (a conflict); a message too large for a batch, ``SessionTooLarge``. A 4xx
answer the adapter did not expect, or a Service Bus entity that does not exist or may not be
used, is left as it is: a bug or a wrong configuration, which retrying cannot mend.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

from azure.core.exceptions import AzureError, HttpResponseError
from azure.servicebus.exceptions import (
    MessageSizeExceededError,
    MessagingEntityDisabledError,
    MessagingEntityNotFoundError,
    ServiceBusAuthenticationError,
    ServiceBusAuthorizationError,
    ServiceBusError,
    SessionCannotBeLockedError,
)

from ..domain.errors import (
    PipelineError,
    ServiceUnavailable,
    SessionLocked,
    SessionTooLarge,
)

TABLE_STORAGE = "Table Storage"
BLOB_STORAGE = "Blob Storage"
QUEUE_STORAGE = "the Storage queue"

_RETRYABLE_STATUSES = frozenset({408, 429})
# The configuration is wrong (no such queue, no right to it): retrying cannot help.
_CONFIGURATION_ERRORS = (
    MessagingEntityNotFoundError,
    MessagingEntityDisabledError,
    ServiceBusAuthenticationError,
    ServiceBusAuthorizationError,
)

P = ParamSpec("P")
R = TypeVar("R")


@contextmanager
def azure_errors(service: str) -> Iterator[None]:
    try:
        yield
    except PipelineError:
        raise
    except SessionCannotBeLockedError as error:
        raise SessionLocked(
            "Another receiver holds the session's lock (the processor is running it). Try "
            "again once it has let the session go."
        ) from error
    except _CONFIGURATION_ERRORS:
        raise
    except MessageSizeExceededError as error:
        raise SessionTooLarge(
            f"A message is larger than {service} accepts in one batch, so it was not sent."
        ) from error
    except ServiceBusError as error:
        raise ServiceUnavailable(service, type(error).__name__) from error
    except HttpResponseError as error:
        status = error.status_code or 0
        if status >= 500 or status in _RETRYABLE_STATUSES:
            raise ServiceUnavailable(service, f"HTTP {status}") from error
        raise
    except AzureError as error:
        raise ServiceUnavailable(service, type(error).__name__) from error


def translated(service: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A method decorator: the method's SDK errors translated as ``azure_errors`` does."""

    def decorate(method: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(method)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            with azure_errors(service):
                return method(*args, **kwargs)

        return wrapper

    return decorate
