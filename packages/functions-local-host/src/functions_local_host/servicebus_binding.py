"""A received Service Bus message as the worker gets it, and the invocation that hands it over.

For an SDK-type binding (the function takes
``azurefunctions.extensions.bindings.servicebus.ServiceBusReceivedMessage``) the Service Bus
extension turns the message into ``ParameterBindingData``
(``ServiceBusExtensionConfigProvider.ConvertReceivedMessageToBindingData`` in the Azure SDK for
.NET), and the Functions host sends it as ``ModelBindingData``: version ``1.0``, source
``AzureServiceBusReceivedMessage``, content type ``application/octet-stream``, content = the 16
bytes of the lock token (``Guid.ToByteArray()``: .NET's byte order, Python's ``uuid.bytes_le``)
followed by ``message.GetRawAmqpMessage().ToBytes()``: the AMQP encoding of the message as the
.NET client holds it. This module builds the same bytes from the message the host's receiver
got. What the .NET client changes on the way:

- the header's delivery count is the broker's plus one (``AmqpMessageConverter``: 0 on the wire
  for a first delivery, 1 in .NET);
- its sections are encoded in AMQP order (header, delivery annotations, message annotations,
  properties, application properties, body, footer) with their .NET types: the broker's times as
  timestamps, sequence numbers as longs, message and correlation ids as strings.

Service Bus also sends the lock token in the delivery annotations (``x-opt-lock-token``): the
extension's own sample message carries it, and the Python and Node extensions find the AMQP
message by it. A broker that sends the lock token only as the delivery tag gets it added here.

The Python client decodes AMQP strings, symbols and binaries alike to ``bytes``: a ``bytes``
value in the application properties or annotations is encoded as a string when it is UTF-8 (the
Python and .NET senders send text as strings), else as binary.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from azure.servicebus import ServiceBusReceivedMessage
from azure.servicebus._pyamqp._encode import (
    describe_performative,
    encode_annotations,
    encode_application_properties,
    encode_value,
)
from azure.servicebus._pyamqp.message import Header, Properties
from azure.servicebus._pyamqp.types import TYPE, VALUE, AMQPTypes
from azure.servicebus.amqp import AmqpAnnotatedMessage, AmqpMessageBodyType

from .config import HostConfigurationError
from .functions import FunctionSpec, Outcome, invoke
from .rpc import messages, typed_metadata

logger = logging.getLogger("functions_local_host")

BINDING_VERSION = "1.0"
BINDING_SOURCE = "AzureServiceBusReceivedMessage"
BINDING_CONTENT_TYPE = "application/octet-stream"
LOCK_TOKEN_ANNOTATION = b"x-opt-lock-token"

_HEADER, _DELIVERY_ANNOTATIONS, _MESSAGE_ANNOTATIONS = 0x70, 0x71, 0x72
_APPLICATION_PROPERTIES, _DATA, _SEQUENCE, _VALUE, _FOOTER = 0x74, 0x75, 0x76, 0x77, 0x78
# The broker's annotations that .NET reads as DateTime (re-encoded as timestamps) or long.
_TIMESTAMPS = {b"x-opt-enqueued-time", b"x-opt-scheduled-enqueue-time", b"x-opt-locked-until"}
_LONGS = {b"x-opt-sequence-number", b"x-opt-enqueue-sequence-number"}


def check_supported(spec: FunctionSpec) -> None:
    """The host hands messages over as SDK types only (one, or a list of them)."""
    if not spec.supports_deferred_binding:
        raise HostConfigurationError(
            f"{spec.name}: the local host passes Service Bus messages as the SDK type only; "
            "annotate the trigger parameter with "
            "azurefunctions.extensions.bindings.servicebus.ServiceBusReceivedMessage "
            "(or a list of them with cardinality many)."
        )
    if str(spec.setting("cardinality", "one")).lower() not in ("one", "many"):
        raise HostConfigurationError(f"{spec.name}: cardinality is one or many.")


def is_batch(spec: FunctionSpec) -> bool:
    return str(spec.setting("cardinality", "one")).lower() == "many"


def dotnet_delivery_count(message: ServiceBusReceivedMessage) -> int:
    """The delivery count the .NET client (and so the Functions host) sees: the broker's + 1."""
    return (message.delivery_count or 0) + 1


def invoke_with_message(
    spec: FunctionSpec, message: ServiceBusReceivedMessage, *, entity: str
) -> Outcome:
    """Invoke ``spec`` with ``message`` the way the Functions host does: the message as
    ``ModelBindingData``, the extension's binding data as trigger metadata. A message the host
    cannot convert fails its invocation (and is abandoned), as on the host."""
    try:
        data = messages.TypedData(model_binding_data=_model_binding_data(message))
        metadata = typed_metadata(binding_data(message))
    except Exception as error:
        logger.exception("%s: message %s cannot be bound", spec.name, message.message_id)
        return Outcome(succeeded=False, error=f"{type(error).__name__}: {error}")
    trace_parent, trace_state = _trace_context(message)
    return invoke(
        spec,
        data,
        trigger_metadata=metadata,
        reason=f"New ServiceBus message detected on '{entity}'.",
        trace_parent=trace_parent,
        trace_state=trace_state,
        log_detail=(
            f"\n  Trigger Details: MessageId: {message.message_id}, SequenceNumber: "
            f"{message.sequence_number}, DeliveryCount: {dotnet_delivery_count(message)}, "
            f"SessionId: {message.session_id}"
        ),
    )


def _model_binding_data(message: ServiceBusReceivedMessage) -> Any:
    """One message as the extension's ``ModelBindingData`` (``binding_content``)."""
    return messages.ModelBindingData(
        version=BINDING_VERSION,
        source=BINDING_SOURCE,
        content_type=BINDING_CONTENT_TYPE,
        content=binding_content(message),
    )


def invoke_with_messages(
    spec: FunctionSpec, batch: list[ServiceBusReceivedMessage], *, entity: str
) -> Outcome:
    """Invoke a batch trigger (cardinality many) with ``batch`` as the Functions host does:
    ``CollectionModelBindingData`` holding each message's ``ModelBindingData``, and the
    extension's batch binding data (each single message's value in a ``<name>Array``)."""
    try:
        data = messages.TypedData(
            collection_model_binding_data=messages.CollectionModelBindingData(
                model_binding_data=[_model_binding_data(message) for message in batch]
            )
        )
        each = [binding_data(message) for message in batch]
        metadata = typed_metadata({f"{name}Array": [b[name] for b in each] for name in each[0]})
    except Exception as error:
        logger.exception("%s: a batch of %d messages cannot be bound", spec.name, len(batch))
        return Outcome(succeeded=False, error=f"{type(error).__name__}: {error}")
    trace_parent, trace_state = _trace_context(batch[0])
    return invoke(
        spec,
        data,
        trigger_metadata=metadata,
        reason=f"New ServiceBus message detected on '{entity}'.",
        trace_parent=trace_parent,
        trace_state=trace_state,
        log_detail=(
            f"\n  Trigger Details: MessageCount: {len(batch)}, MessageIds: "
            f"{', '.join(str(m.message_id) for m in batch)}, SessionId: {batch[0].session_id}"
        ),
    )


def _trace_context(message: ServiceBusReceivedMessage) -> tuple[str, str]:
    """The W3C trace context (traceparent, tracestate) that ``message`` carries in the Service
    Bus SDKs' application properties: traceparent, else Diagnostic-Id; "" when absent. A batch
    is invoked in its first message's."""
    properties = message.application_properties or {}
    trace_parent = _property(properties, "traceparent") or _property(properties, "Diagnostic-Id")
    return trace_parent, _property(properties, "tracestate")


def _property(properties: Mapping[Any, Any], name: str) -> str:
    """An application property as text ("" when absent); the decoder's keys are bytes."""
    value = properties.get(name.encode(), properties.get(name))
    if isinstance(value, bytes):
        return value.decode("ascii", "replace")
    return value if isinstance(value, str) else ""


def binding_content(message: ServiceBusReceivedMessage) -> bytes:
    """The content of the extension's ParameterBindingData for ``message``."""
    lock_token = uuid.UUID(str(message.lock_token))
    return lock_token.bytes_le + amqp_bytes(message.raw_amqp_message, lock_token)


def amqp_bytes(raw: AmqpAnnotatedMessage, lock_token: uuid.UUID) -> bytes:
    """``AmqpAnnotatedMessage.ToBytes()`` of the message as the .NET client received it."""
    output = bytearray()
    if raw.header is not None:
        header = raw.header
        encode_value(
            output,
            describe_performative(
                Header(
                    durable=header.durable,
                    priority=header.priority,
                    ttl=header.time_to_live,
                    first_acquirer=header.first_acquirer,
                    delivery_count=(header.delivery_count or 0) + 1,
                )
            ),
        )
    delivery = {key: _typed(key, value) for key, value in (raw.delivery_annotations or {}).items()}
    delivery.setdefault(LOCK_TOKEN_ANNOTATION, {TYPE: AMQPTypes.uuid, VALUE: lock_token})
    _section(output, _DELIVERY_ANNOTATIONS, encode_annotations(delivery))
    if raw.annotations:
        annotations = {key: _typed(key, value) for key, value in raw.annotations.items()}
        _section(output, _MESSAGE_ANNOTATIONS, encode_annotations(annotations))
    if raw.properties is not None:
        encode_value(output, describe_performative(_properties(raw)))
    if raw.application_properties:
        properties = {
            _text(key): _typed(key, value) for key, value in raw.application_properties.items()
        }
        _section(output, _APPLICATION_PROPERTIES, encode_application_properties(properties))
    _encode_body(output, raw)
    if raw.footer:
        _section(output, _FOOTER, encode_annotations(dict(raw.footer)))
    return bytes(output)


def _section(output: bytearray, code: int, content: Any) -> None:
    described = (
        {TYPE: AMQPTypes.ulong, VALUE: code},
        content,
    )
    encode_value(output, {TYPE: AMQPTypes.described, VALUE: described})


def _encode_body(output: bytearray, raw: AmqpAnnotatedMessage) -> None:
    if raw.body_type == AmqpMessageBodyType.DATA:
        for chunk in raw.body:
            _section(output, _DATA, {TYPE: AMQPTypes.binary, VALUE: bytes(chunk)})
    elif raw.body_type == AmqpMessageBodyType.SEQUENCE:
        for items in raw.body:
            _section(output, _SEQUENCE, {TYPE: None, VALUE: list(items)})
    else:
        _section(output, _VALUE, {TYPE: None, VALUE: raw.body})


def _properties(raw: AmqpAnnotatedMessage) -> Properties:
    source = raw.properties
    assert source is not None
    # The SDK's message properties carry the AMQP section's field names.
    fields = {name: getattr(source, name) for name in Properties._fields}
    ids = {name: _message_id(fields[name]) for name in ("message_id", "correlation_id")}
    return Properties(**{**fields, **ids})


def _message_id(value: Any) -> Any:
    # .NET reads a message id into AmqpMessageId(id.ToString()) and writes it back as a string.
    if isinstance(value, bytes):
        return _text(value)
    return value


def _text(value: Any) -> Any:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value
    return value


def _typed(key: Any, value: Any) -> Any:
    name = key.encode() if isinstance(key, str) else key
    if isinstance(value, dict) and TYPE in value:
        return value
    if name in _TIMESTAMPS and isinstance(value, int | datetime):
        return {TYPE: AMQPTypes.timestamp, VALUE: value}
    if name in _LONGS and isinstance(value, int):
        return {TYPE: AMQPTypes.long, VALUE: value}
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        kind = AMQPTypes.int if -(2**31) <= value < 2**31 else AMQPTypes.long
        return {TYPE: kind, VALUE: value}
    if isinstance(value, bytes):
        text = _text(value)
        return {TYPE: AMQPTypes.string if isinstance(text, str) else AMQPTypes.binary, VALUE: value}
    return value


def binding_data(message: ServiceBusReceivedMessage) -> dict[str, Any]:
    """The Service Bus extension's binding data for one message (its trigger metadata)."""
    expires = _utc(message.expires_at_utc)
    enqueued = _utc(message.enqueued_time_utc)
    properties = _plain(message.application_properties or {})
    return {
        "DeliveryCount": dotnet_delivery_count(message),
        "DeadLetterSource": message.dead_letter_source,
        "LockToken": str(message.lock_token),
        "ExpiresAtUtc": expires,
        "ExpiresAt": expires,
        "EnqueuedTimeUtc": enqueued,
        "EnqueuedTime": enqueued,
        "MessageId": message.message_id,
        "ContentType": message.content_type,
        "ReplyTo": message.reply_to,
        "SequenceNumber": message.sequence_number,
        "To": message.to,
        "Label": message.subject,
        "Subject": message.subject,
        "CorrelationId": message.correlation_id,
        "ApplicationProperties": properties,
        "UserProperties": properties,
        "SessionId": message.session_id,
        "ReplyToSessionId": message.reply_to_session_id,
        "PartitionKey": message.partition_key,
        "TransactionPartitionKey": _text(
            (message.raw_amqp_message.annotations or {}).get(b"x-opt-via-partition-key")
        ),
    }


def _utc(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat()


def _plain(values: Mapping[Any, Any]) -> dict[str, Any]:
    plain: dict[str, Any] = {}
    for key, value in values.items():
        name = _text(key)
        item = _text(value)
        if isinstance(item, datetime | timedelta | uuid.UUID | bytes):
            item = str(item)
        plain[str(name)] = item
    return plain
