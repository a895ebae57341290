"""A small function app for testing the local host on its own: every function records what it
saw in ``SEEN`` and does what the message or request asks (sleep, fail, settle, state)."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import defaultdict
from datetime import UTC, datetime

# A batch trigger's parameter is typing.List[...]: the worker (azure-functions-runtime 1.3)
# refuses the builtin list[...] ("invalid non-type annotation"): its generic-type check knows
# only typing's aliases.
from typing import Any, List  # noqa: UP035

import azure.functions as func
from azurefunctions.extensions.bindings.protos.settlement_pb2 import GetSessionStateRequest
from azurefunctions.extensions.bindings.servicebus import (
    ServiceBusMessageActions,
    ServiceBusReceivedMessage,
)


class Seen:
    """Thread-safe record of invocations, by function name, plus the sessions in flight."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self.calls: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.deliveries: dict[str, int] = defaultdict(int)
        self.in_flight = 0
        self.max_in_flight = 0

    def delivery(self, message_id: str) -> int:
        """Which delivery of ``message_id`` this is, counted as invocations start (1: the
        first)."""
        with self._lock:
            self.deliveries[message_id] += 1
            return self.deliveries[message_id]

    def add(self, function: str, **facts: Any) -> None:
        with self._lock:
            self.calls[function].append({"at": time.monotonic(), **facts})

    def of(self, function: str) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.calls[function])

    def enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self._lock.notify_all()

    def gather(self, count: int, within: float) -> None:
        """Wait until ``count`` invocations are in flight at once, or ``within`` seconds."""
        with self._lock:
            self._lock.wait_for(lambda: self.in_flight >= count, timeout=within)

    def leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def clear(self) -> None:
        with self._lock:
            self.calls.clear()
            self.deliveries.clear()
            self.in_flight = self.max_in_flight = 0


SEEN = Seen()
app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)


# -- Service Bus ------------------------------------------------------------------------------


def _run_command(
    name: str,
    message: ServiceBusReceivedMessage,
    actions: ServiceBusMessageActions,
    context: func.Context | None = None,
) -> None:
    """The body is JSON: {"n": sequence, "sleep": seconds, "renew_every": seconds (while
    sleeping, renew the message lock, or the session lock on a session, that often),
    "fail_times": k (raise on the first k deliveries), "state": "get"|"clear"|<text to set>,
    "settle": "complete"|"complete_twice"|"deadletter"|"abandon"|"defer", "settle_times": k
    (settle only on the first k deliveries), "release": true (release the session),
    "gather": k (first wait until k invocations run at once, at most "gather_within" seconds),
    "sleep_once": true (sleep on the first delivery only), "sleep_unless_file": path (sleep
    only when the file does not exist, creating it: once across worker processes)}.
    "state": "by_delivery" sets the
    state to "delivery <n>"; a failed state write is recorded in "state_error", then raised."""
    command = json.loads(
        b"".join(message.body) if not isinstance(message.body, bytes) else message.body
    )
    facts: dict[str, Any] = {
        "session_id": message.session_id,
        "sequence": command.get("n"),
        "delivery_count": message.delivery_count,
        "message_id": message.message_id,
        "sequence_number": message.sequence_number,
        "type": type(message).__name__,
        "started": time.monotonic(),
        # The broker's own clock: when this delivery's lock runs out, when it was enqueued.
        "locked_until": message.locked_until_utc,
        "enqueued": message.enqueued_time_utc,
        "trace_parent": context.trace_context.trace_parent if context else None,
    }
    earlier = [c for c in SEEN.of(name) if c["message_id"] == message.message_id]
    facts["delivery"] = delivery = SEEN.delivery(str(message.message_id))
    SEEN.enter()
    try:
        if "gather" in command:
            SEEN.gather(command["gather"], command.get("gather_within", 5))
        if _should_sleep(command, delivery):
            _sleep(command, message, actions, facts)
        state = command.get("state")
        if state == "by_delivery":
            state = f"delivery {delivery}"
        try:
            if state == "get":
                facts["state"] = _session_state(actions, message.session_id)
            elif state == "clear":
                actions.set_session_state(message.session_id, b"")
            elif state:
                actions.set_session_state(message.session_id, state.encode())
                facts["state_written"] = state
        except Exception as error:
            facts["state_error"] = f"{type(error).__name__}: {error}"
            raise
        settle = command.get("settle")
        if len(earlier) >= command.get("settle_times", len(earlier) + 1):
            settle = None
        if settle == "complete":
            actions.complete(message)
        elif settle == "complete_twice":
            actions.complete(message)
            try:
                actions.complete(message)
            except Exception as error:
                facts["second_complete"] = f"{type(error).__name__}: {error}"
        elif settle == "deadletter":
            actions.deadletter(
                message, deadletter_reason="TestReason", deadletter_error_description="because"
            )
        elif settle == "abandon":
            actions.abandon(message)
        elif settle == "defer":
            actions.defer(message)
        if command.get("release"):
            actions.release_session(message.session_id)
        if len(earlier) < command.get("fail_times", 0):
            facts["raised"] = True
            raise RuntimeError(f"failing delivery {message.delivery_count} on purpose")
    finally:
        SEEN.leave()
        SEEN.add(name, **facts)


def _should_sleep(command: dict[str, Any], delivery: int) -> bool:
    if command.get("sleep_once") and delivery > 1:
        return False
    marker = command.get("sleep_unless_file")
    if marker:
        try:
            with open(marker, "x"):
                return True
        except FileExistsError:
            return False
    return True


def _session_state(actions: ServiceBusMessageActions, session_id: str) -> bytes:
    """The session's state (``b""`` when it has none), over the Settlement service's
    ``GetSessionState`` through the stub the client holds: the extension's client can set a
    session's state but has no getter."""
    request = GetSessionStateRequest()
    request.sessionId = session_id
    return bytes(actions._client.GetSessionState(request).sessionState)


def _sleep(
    command: dict[str, Any],
    message: ServiceBusReceivedMessage,
    actions: ServiceBusMessageActions,
    facts: dict[str, Any],
) -> None:
    """Sleep ``command["sleep"]`` seconds, renewing the lock every ``renew_every`` seconds;
    the renewals and their errors go in ``facts``."""
    end = time.monotonic() + command.get("sleep", 0)
    every = command.get("renew_every")
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(left, every or left))
        if every and time.monotonic() < end:
            try:
                if message.session_id:
                    actions.renew_session_lock(message.session_id)
                else:
                    actions.renew_message_lock(message)
                facts["renewals"] = facts.get("renewals", 0) + 1
            except Exception as error:
                facts.setdefault("renew_errors", []).append(f"{type(error).__name__}: {error}")


@app.service_bus_queue_trigger(
    arg_name="message",
    queue_name="%SESSION_QUEUE%",
    connection="ServiceBusConnection",
    is_sessions_enabled=True,
)
def session_tasks(
    message: ServiceBusReceivedMessage, message_actions: ServiceBusMessageActions
) -> None:
    _run_command("session_tasks", message, message_actions)


@app.service_bus_queue_trigger(
    arg_name="message",
    queue_name="%MANUAL_SESSION_QUEUE%",
    connection="ServiceBusConnection",
    is_sessions_enabled=True,
    auto_complete_messages=False,
)
def manual_session_tasks(
    message: ServiceBusReceivedMessage, message_actions: ServiceBusMessageActions
) -> None:
    _run_command("manual_session_tasks", message, message_actions)


@app.service_bus_queue_trigger(
    arg_name="message", queue_name="%PLAIN_QUEUE%", connection="ServiceBusConnection"
)
def plain_tasks(
    message: ServiceBusReceivedMessage,
    message_actions: ServiceBusMessageActions,
    context: func.Context,
) -> None:
    _run_command("plain_tasks", message, message_actions, context)


def _run_batch(
    name: str, messages: list[ServiceBusReceivedMessage], actions: ServiceBusMessageActions
) -> None:
    """A batch (cardinality many): records the batch's session and sequence numbers ("n"),
    then settles each message its body asks to ({"settle": "deadletter"}); {"fail_once": true}
    in any of them fails the whole invocation the first time that message is seen;
    {"release": true} releases the session; {"sleep": seconds} sleeps (on the first delivery
    only with "sleep_once"), renewing the session lock (or each message's lock without a
    session) every "renew_every" seconds meanwhile: the locked-until times the renewals
    returned go in "renewed", their errors in "renew_errors"."""
    commands = [
        json.loads(b"".join(m.body) if not isinstance(m.body, bytes) else m.body) for m in messages
    ]
    before = {i for call in SEEN.of(name) for i in call["message_ids"]}
    renewed: list[datetime] = []
    renew_errors: list[str] = []
    SEEN.add(
        name,
        session_ids=[m.session_id for m in messages],
        sequence=[c.get("n") for c in commands],
        message_ids=[m.message_id for m in messages],
        renewed=renewed,
        renew_errors=renew_errors,
    )
    for message, command in zip(messages, commands, strict=True):
        again = message.message_id in before
        if command.get("sleep") and not (command.get("sleep_once") and again):
            _sleep_renewing_batch(command, messages, actions, renewed, renew_errors)
        if command.get("settle") == "deadletter":
            actions.deadletter(message, deadletter_reason="Asked")
        if command.get("release"):
            actions.release_session(str(message.session_id))
    if any(
        command.get("fail_once") and message.message_id not in before
        for message, command in zip(messages, commands, strict=True)
    ):
        raise RuntimeError("the batch asked to fail")


def _sleep_renewing_batch(
    command: dict[str, Any],
    messages: list[ServiceBusReceivedMessage],
    actions: ServiceBusMessageActions,
    renewed: list[datetime],
    errors: list[str],
) -> None:
    end = time.monotonic() + float(command["sleep"])
    every = command.get("renew_every")
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(left, every or left))
        if not every or time.monotonic() >= end:
            continue
        try:
            if messages[0].session_id:
                until = actions.renew_session_lock(str(messages[0].session_id))
                renewed.append(until.ToDatetime(tzinfo=UTC))
            else:
                for message in messages:
                    actions.renew_message_lock(message)
                renewed.append(datetime.now(UTC))
        except Exception as error:
            errors.append(f"{type(error).__name__}: {error}")


@app.service_bus_queue_trigger(
    arg_name="messages",
    queue_name="%SESSION_BATCH_QUEUE%",
    connection="ServiceBusConnection",
    is_sessions_enabled=True,
    cardinality=func.Cardinality.MANY,
)
def session_batches(
    messages: List[ServiceBusReceivedMessage],  # noqa: UP006 (see the import of List)
    message_actions: ServiceBusMessageActions,
) -> None:
    _run_batch("session_batches", messages, message_actions)


@app.service_bus_queue_trigger(
    arg_name="messages",
    queue_name="%PLAIN_BATCH_QUEUE%",
    connection="ServiceBusConnection",
    cardinality=func.Cardinality.MANY,
)
def plain_batches(
    messages: List[ServiceBusReceivedMessage],  # noqa: UP006 (see the import of List)
    message_actions: ServiceBusMessageActions,
) -> None:
    _run_batch("plain_batches", messages, message_actions)


# -- HTTP -------------------------------------------------------------------------------------


def _echo(name: str, req: func.HttpRequest) -> func.HttpResponse:
    seen = {
        "method": req.method,
        "url": req.url,
        "params": dict(req.params),
        "route_params": dict(req.route_params),
        "body": req.get_body().decode(),
        "header": req.headers.get("x-test"),
    }
    SEEN.add(name, **seen)
    return func.HttpResponse(
        json.dumps(seen),
        status_code=201 if req.method == "POST" else 200,
        mimetype="application/json",
        headers={"X-Echo": name},
    )


@app.route(route="public/{name?}", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
def public(req: func.HttpRequest) -> func.HttpResponse:
    return _echo("public", req)


@app.route(route="items/{item_id:int}/{label}", methods=["GET", "POST"])
def items(req: func.HttpRequest) -> func.HttpResponse:
    return _echo("items", req)


@app.route(route="items/special/{label}", methods=["GET"])
def special_items(req: func.HttpRequest) -> func.HttpResponse:
    return _echo("special_items", req)


@app.route(route="admin-only", methods=["POST"], auth_level=func.AuthLevel.ADMIN)
def admin_only(req: func.HttpRequest) -> func.HttpResponse:
    return _echo("admin_only", req)


@app.route(route="slow", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
def slow(req: func.HttpRequest) -> func.HttpResponse:
    time.sleep(float(req.params.get("seconds", "1")))
    return func.HttpResponse("done")


@app.route(route="traced", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
async def traced(req: func.HttpRequest, context: func.Context) -> func.HttpResponse:
    """What an async function sees of the invocation's trace context: the context's, and the
    current OpenTelemetry span's (the worker makes it current when its OpenTelemetry is on)."""
    from opentelemetry import trace

    current = trace.get_current_span().get_span_context()
    SEEN.add(
        "traced",
        trace_parent=context.trace_context.trace_parent,
        trace_state=context.trace_context.trace_state,
        current_trace_id=trace.format_trace_id(current.trace_id) if current.is_valid else None,
    )
    return func.HttpResponse(status_code=204)


@app.route(route="whoami", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
def whoami(req: func.HttpRequest) -> func.HttpResponse:
    """The worker's process id, and a log line the host should show."""
    logging.getLogger("sample_app").warning("whoami from process %d", os.getpid())
    return func.HttpResponse(str(os.getpid()))


@app.route(route="boom", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
def boom(req: func.HttpRequest) -> func.HttpResponse:
    raise RuntimeError("boom")


# -- timer and storage queue ------------------------------------------------------------------


@app.timer_trigger(arg_name="timer", schedule="%EVERY_SECOND%", run_on_startup=True)
def every_second(timer: func.TimerRequest) -> None:
    SEEN.add(
        "every_second", past_due=timer.past_due, status=dict(getattr(timer, "schedule_status", {}))
    )


@app.timer_trigger(arg_name="timer", schedule="*/1 * * * * *")
def slow_timer(timer: func.TimerRequest) -> None:
    status = dict(getattr(timer, "schedule_status", {}))
    time.sleep(2.2)
    # When this run ended, on the host's clock (UTC, as the schedule's occurrences).
    SEEN.add("slow_timer", past_due=timer.past_due, status=status, ended=datetime.now(UTC))


@app.timer_trigger(arg_name="timer", schedule="%MONITORED_SCHEDULE%", use_monitor=True)
def monitored(timer: func.TimerRequest) -> None:
    SEEN.add(
        "monitored", past_due=timer.past_due, status=dict(getattr(timer, "schedule_status", {}))
    )


@app.queue_trigger(arg_name="msg", queue_name="%STORAGE_QUEUE%", connection="AzureWebJobsStorage")
def storage_queue(msg: func.QueueMessage) -> None:
    body = msg.get_body().decode()
    SEEN.add(
        "storage_queue",
        id=msg.id,
        body=body,
        dequeue_count=msg.dequeue_count,
        insertion_time=msg.insertion_time,
        type=type(msg).__name__,
    )
    if body.startswith("fail"):
        raise ValueError(f"{body} on purpose")


# -- what a Service Bus function gets -----------------------------------------------------------

MESSAGE_FIELDS = (
    "message_id", "session_id", "sequence_number", "enqueued_sequence_number", "lock_token",
    "delivery_count", "time_to_live", "enqueued_time_utc", "expires_at_utc", "locked_until_utc",
    "scheduled_enqueue_time_utc", "content_type", "correlation_id", "subject", "to", "reply_to",
    "reply_to_session_id", "partition_key", "application_properties", "dead_letter_reason",
    "dead_letter_error_description", "dead_letter_source", "state",
)  # fmt: skip


def message_fields(message: Any) -> dict[str, Any]:
    """The public fields of an ``azure.servicebus.ServiceBusReceivedMessage``, comparable."""
    fields: dict[str, Any] = {name: getattr(message, name) for name in MESSAGE_FIELDS}
    fields["lock_token"] = str(fields["lock_token"]) if fields["lock_token"] else None
    fields["state"] = int(fields["state"]) if fields["state"] is not None else None
    fields["body"] = b"".join(message.body)
    return fields


@app.service_bus_queue_trigger(
    arg_name="message",
    queue_name="%FIELDS_QUEUE%",
    connection="ServiceBusConnection",
    is_sessions_enabled=True,
)
def message_as_received(message: ServiceBusReceivedMessage) -> None:
    SEEN.add("message_as_received", type=type(message).__name__, **message_fields(message))
