"""The functions of an app, as the host sees them: each one's trigger, with %SETTING%
references resolved, and how to call it with logging like ``func start``."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import time
import typing
import uuid
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .config import resolve

logger = logging.getLogger("localdev.host")

SERVICE_BUS_TRIGGER = "serviceBusTrigger"
HTTP_TRIGGER = "httpTrigger"
TIMER_TRIGGER = "timerTrigger"
QUEUE_TRIGGER = "queueTrigger"


@dataclass(frozen=True)
class FunctionSpec:
    """One function: its name, its trigger binding (settings resolved), its Python callable."""

    name: str
    trigger_type: str
    arg_name: str
    binding: Mapping[str, Any]
    user_function: Callable[..., Any]
    parameters: tuple[str, ...] = field(default=())

    def setting(self, key: str, default: Any = None) -> Any:
        return self.binding.get(key, default)


def discover(
    app: Any, environ: Mapping[str, str], *, only: set[str] | None = None
) -> list[FunctionSpec]:
    """Every function of ``app`` (a FunctionApp) with its trigger. A %NAME% in a trigger setting
    that is not an app setting fails here, at start, by name (as the host does)."""
    specs = []
    for function in _functions_of(app):
        if only is not None and function.get_function_name() not in only:
            continue
        document = json.loads(function.get_function_json())
        trigger = next(
            (b for b in document["bindings"] if str(b["type"]).lower().endswith("trigger")), None
        )
        if trigger is None:
            logger.warning("%s has no trigger and is skipped", function.get_function_name())
            continue
        binding = {
            key: resolve(value, environ) if isinstance(value, str) else value
            for key, value in trigger.items()
        }
        user_function = function.get_user_function()
        specs.append(
            FunctionSpec(
                name=function.get_function_name(),
                trigger_type=str(trigger["type"]),
                arg_name=str(trigger["name"]),
                binding=binding,
                user_function=user_function,
                parameters=tuple(inspect.signature(user_function).parameters),
            )
        )
    return specs


_INDEXED: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()


def _functions_of(app: Any) -> list[Any]:
    # FunctionApp.get_functions() records the names it indexed and fails on "duplicate" names
    # when called again. The worker indexes once per process; here a test or a tool may have
    # indexed the app before the host starts, so the host indexes from a clean record, once.
    if app not in _INDEXED:
        if getattr(app, "functions_bindings", None):
            app.functions_bindings = None
        _INDEXED[app] = list(app.get_functions())
    return _INDEXED[app]


class InvocationContext:
    """What a function gets as ``context`` (a subset of ``azure.functions.Context``)."""

    def __init__(self, invocation_id: str, function_name: str) -> None:
        self.invocation_id = invocation_id
        self.function_name = function_name
        self.function_directory = ""
        self.trace_context = None
        self.retry_context = None


def invoke(
    spec: FunctionSpec, arguments: Mapping[str, Any], *, reason: str, log_detail: str = ""
) -> tuple[bool, Any, BaseException | None]:
    """Call the function with the arguments its signature asks for, logging "Executing" and
    "Executed" lines like the host. Returns (succeeded, return value, exception); never raises
    what the function raises."""
    invocation_id = str(uuid.uuid4())
    kwargs = {name: arguments[name] for name in spec.parameters if name in arguments}
    if "context" in spec.parameters and "context" not in kwargs:
        kwargs["context"] = InvocationContext(invocation_id, spec.name)
    logger.info(
        "Executing 'Functions.%s' (Reason='%s', Id=%s)%s",
        spec.name,
        reason,
        invocation_id,
        log_detail,
    )
    started = time.monotonic()
    try:
        result = spec.user_function(**kwargs)
        if inspect.isawaitable(result):
            result = asyncio.run(_await(result))
    except BaseException as error:
        if isinstance(error, KeyboardInterrupt | SystemExit):
            raise
        logger.error(
            "Executed 'Functions.%s' (Failed, Id=%s, Duration=%dms)\n  %s: %s",
            spec.name,
            invocation_id,
            _ms(started),
            type(error).__name__,
            error,
        )
        return False, None, error
    logger.info(
        "Executed 'Functions.%s' (Succeeded, Id=%s, Duration=%dms)",
        spec.name,
        invocation_id,
        _ms(started),
    )
    return True, result, None


async def _await(awaitable: Any) -> Any:
    return await awaitable


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def parameters_of_type(spec: FunctionSpec, cls: type, *, fallback_name: str) -> list[str]:
    """Names of the function's parameters annotated with ``cls`` (or, when annotations cannot
    be read, the parameter called ``fallback_name``)."""
    try:
        hints = typing.get_type_hints(spec.user_function)
    except Exception:
        hints = {}
    names = [
        name
        for name, hint in hints.items()
        if name in spec.parameters and isinstance(hint, type) and issubclass(hint, cls)
    ]
    if not names and fallback_name in spec.parameters:
        names = [fallback_name]
    return names
