"""The functions of an app, as the host sees them after the worker indexed it: each one's id
and trigger, with %SETTING% references resolved; and how the host invokes one (an
``InvocationRequest`` to the worker) with the Functions host's ``Executing``/``Executed`` lines."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from .config import HostConfigurationError, resolve
from .rpc import messages, typed_data


class Worker(Protocol):
    """What invokes a function: the worker in this process, or a pool of worker processes.
    ``invoke`` raises ``TimeoutError`` when the invocation outlasts ``function_timeout``."""

    function_timeout: float | None

    def invoke(self, invocation: Any) -> Any: ...


logger = logging.getLogger("functions_local_host")

SERVICE_BUS_TRIGGER = "serviceBusTrigger"
HTTP_TRIGGER = "httpTrigger"
TIMER_TRIGGER = "timerTrigger"
QUEUE_TRIGGER = "queueTrigger"


@dataclass(frozen=True)
class FunctionSpec:
    """One function: its name and id in the worker, its trigger binding (settings resolved)."""

    name: str
    function_id: str
    trigger_type: str
    arg_name: str
    binding: Mapping[str, Any]
    metadata: Any = field(repr=False, compare=False)  # the worker's RpcFunctionMetadata
    worker: Worker = field(repr=False, compare=False)

    def setting(self, key: str, default: Any = None) -> Any:
        return self.binding.get(key, default)

    @property
    def supports_deferred_binding(self) -> bool:
        """The worker binds the trigger to an SDK type (``ParameterBindingData``)."""
        return bool((self.binding.get("properties") or {}).get("SupportsDeferredBinding"))


def discover(
    metadata: Iterable[Any],
    environ: Mapping[str, str],
    *,
    worker: Worker,
    only: set[str] | None = None,
) -> list[FunctionSpec]:
    """The functions the worker indexed (``RpcFunctionMetadata``), with their trigger binding
    from the raw bindings. A %NAME% in a trigger setting that is not an app setting fails here,
    at start, by name (as the host does). The host carries out no output binding but the HTTP
    response, so a function with another one is refused."""
    specs = []
    for function in metadata:
        if only is not None and function.name not in only:
            continue
        bindings = [json.loads(raw) for raw in function.raw_bindings]
        trigger = next((b for b in bindings if str(b["type"]).lower().endswith("trigger")), None)
        if trigger is None:
            logger.warning("%s has no trigger and is skipped", function.name)
            continue
        outputs = [
            str(b["name"])
            for b in bindings
            if str(b.get("direction", "")).lower() == "out" and b.get("name") != "$return"
        ]
        if outputs:
            raise HostConfigurationError(
                f"{function.name}: the local host does not carry out output bindings ({outputs})."
            )
        specs.append(
            FunctionSpec(
                name=function.name,
                function_id=function.function_id,
                trigger_type=str(trigger["type"]),
                arg_name=str(trigger["name"]),
                binding=_resolved(trigger, environ),
                metadata=function,
                worker=worker,
            )
        )
    return specs


def _resolved(value: Any, environ: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return resolve(value, environ)
    if isinstance(value, dict):
        return {key: _resolved(item, environ) for key, item in value.items()}
    if isinstance(value, list):
        return [_resolved(item, environ) for item in value]
    return value


@dataclass(frozen=True)
class Outcome:
    """What the worker answered: success, the return value (``TypedData`` or None) and, on
    failure, the worker's exception message."""

    succeeded: bool
    return_value: Any = None
    error: str | None = None


def invoke(
    spec: FunctionSpec,
    data: Any,
    *,
    trigger_metadata: Mapping[str, Any] | None = None,
    reason: str,
    log_detail: str = "",
    trace_parent: str = "",
    trace_state: str = "",
) -> Outcome:
    """Send the worker an ``InvocationRequest`` with ``data`` (``TypedData``) for the trigger
    parameter and ``trigger_metadata`` (``TypedData`` by name), logging "Executing" and
    "Executed" like the host. Never raises what the function raises.

    ``trace_parent``/``trace_state``: the W3C trace context of the trigger (the HTTP request's
    headers, the message's properties), the invocation's ``context.trace_context``. The
    Functions host puts its own span for the invocation there, in that trace; this host has
    no spans, so the worker gets the trigger's context itself (empty: none)."""
    invocation_id = str(uuid.uuid4())
    metadata = dict(trigger_metadata or {})
    # WebJobs adds the system binding data to every invocation.
    metadata["sys"] = typed_data(
        {
            "MethodName": spec.name,
            "UtcNow": datetime.now(UTC).isoformat(),
            "RandGuid": str(uuid.uuid4()),
        }
    )
    request = messages.InvocationRequest(
        invocation_id=invocation_id,
        function_id=spec.function_id,
        input_data=[messages.ParameterBinding(name=spec.arg_name, data=data)],
        trigger_metadata=metadata,
        trace_context=messages.RpcTraceContext(trace_parent=trace_parent, trace_state=trace_state),
        retry_context=messages.RetryContext(),
    )
    logger.info(
        "Executing 'Functions.%s' (Reason='%s', Id=%s)%s",
        spec.name,
        reason,
        invocation_id,
        log_detail,
    )
    started = time.monotonic()
    try:
        response = spec.worker.invoke(request)
    except TimeoutError:
        # The WebJobs SDK's FunctionExecutor: its log line, then a FunctionTimeoutException.
        limit = timespan_text(spec.worker.function_timeout or 0)
        logger.error(
            "Timeout value of %s exceeded by function 'Functions.%s' (Id: '%s'). "
            "Initiating cancellation.",
            limit,
            spec.name,
            invocation_id,
        )
        error = f"Timeout value of {limit} was exceeded by function: Functions.{spec.name}"
        logger.error(
            "Executed 'Functions.%s' (Failed, Id=%s, Duration=%dms)\n  %s",
            spec.name,
            invocation_id,
            _ms(started),
            error,
        )
        return Outcome(succeeded=False, error=error)
    if response.result.status != messages.StatusResult.Success:
        error = response.result.exception.message or "the worker reported a failure"
        logger.error(
            "Executed 'Functions.%s' (Failed, Id=%s, Duration=%dms)\n  %s",
            spec.name,
            invocation_id,
            _ms(started),
            error,
        )
        return Outcome(succeeded=False, error=error)
    logger.info(
        "Executed 'Functions.%s' (Succeeded, Id=%s, Duration=%dms)",
        spec.name,
        invocation_id,
        _ms(started),
    )
    return_value = response.return_value if response.HasField("return_value") else None
    return Outcome(succeeded=True, return_value=return_value)


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def timespan_text(seconds: float) -> str:
    """``hh:mm:ss`` (with a fraction when there is one), as .NET writes a TimeSpan."""
    whole = int(seconds)
    text = f"{whole // 3600:02d}:{whole % 3600 // 60:02d}:{whole % 60:02d}"
    fraction = round(seconds - whole, 7)
    return text + (f"{fraction:.7f}"[1:] if fraction else "")
