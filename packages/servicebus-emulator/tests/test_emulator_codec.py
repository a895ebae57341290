"""The emulator's AMQP codec: exact wire types, and hostile bytes fail cleanly."""

from __future__ import annotations

import contextlib
import random
import uuid

import pytest

from servicebus_emulator.codec import (
    Array,
    DecodeError,
    Described,
    Int,
    Long,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
    decode_all,
    encode,
    skip,
)
from servicebus_emulator.message import Message, parse


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (None, b"\x40"),
        (True, b"\x41"),
        (UInt(0), b"\x43"),
        (UInt(7), b"\x52\x07"),
        (UInt(70000), b"\x70\x00\x01\x11\x70"),
        (ULong(0x14), b"\x53\x14"),
        (UByte(3), b"\x50\x03"),
        (UShort(1), b"\x60\x00\x01"),
        (Int(-1), b"\x54\xff"),
        (Long(5), b"\x55\x05"),
        (Timestamp(1), b"\x83" + (1).to_bytes(8, "big")),
        (Symbol("ab"), b"\xa3\x02ab"),
        ("ab", b"\xa1\x02ab"),
        (b"\x01", b"\xa0\x01\x01"),
        ([], b"\x45"),
        (Array(0x98, ()), b"\x45"),  # the SDK mishandles empty arrays
    ],
)
def test_values_are_written_with_the_wire_type_asked_for(value: object, wire: bytes) -> None:
    assert encode(value) == wire


def test_values_round_trip() -> None:
    token = uuid.uuid4()
    value = Described(
        ULong(0x73),
        [
            "id",
            {Symbol("k"): [1, -2, 3.5, b"x" * 300, "y" * 300]},
            Array(0x98, (token,)),
            Array(0xB1, ("a", "b")),
            Timestamp(1_700_000_000_000),
        ],
    )
    decoded = decode_all(encode(value))
    assert decoded.descriptor == 0x73
    assert decoded.value[0] == "id"
    assert decoded.value[1] == {"k": [1, -2, 3.5, b"x" * 300, "y" * 300]}
    assert isinstance(next(iter(decoded.value[1])), Symbol)
    assert decoded.value[2] == [token]
    assert decoded.value[3] == ["a", "b"]
    assert isinstance(decoded.value[4], Timestamp)


def test_skip_finds_the_end_of_a_value_without_building_it() -> None:
    encoded = encode([{"a": b"x" * 1000}, "tail"]) + b"\x40"
    assert skip(encoded, 0) == len(encoded) - 1


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xa1\x05ab",  # string shorter than its size
        b"\xd0\x00\x00\x00\x02\x00\x00\x00\x09",  # list count larger than its bytes
        b"\xc1\x03\x01\x40\x40",  # map with an odd count
        b"\xff",  # unknown format code
        b"\xa1\x02\xff\xfe",  # invalid UTF-8
        b"\x00" * 200,  # descriptors nested without end
    ],
)
def test_malformed_bytes_raise_decode_error(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_all(data)


def test_random_bytes_raise_nothing_but_decode_error() -> None:
    rng = random.Random(7)
    for _ in range(3000):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))
        with contextlib.suppress(DecodeError):
            decode_all(data)


def _sdk_message() -> bytes:
    """What the SDK puts on the wire for a message (its own encoder, as its sender uses it)."""
    from azure.servicebus import ServiceBusMessage
    from azure.servicebus._pyamqp._encode import encode_payload
    from azure.servicebus._transport._pyamqp_transport import PyamqpTransport

    message = ServiceBusMessage(
        b"body", session_id="s-1", message_id="m-1", application_properties={"n": 1}
    )
    outgoing = PyamqpTransport.to_outgoing_amqp_message(message.raw_amqp_message)
    return bytes(encode_payload(bytearray(), outgoing))


def test_the_bare_message_is_kept_byte_for_byte() -> None:
    raw = _sdk_message()
    incoming = parse(raw)
    assert (incoming.message_id, incoming.session_id) == ("m-1", "s-1")
    stored = Message(
        sequence_number=9,
        message_id=incoming.message_id,
        session_id=incoming.session_id,
        enqueued_at=1,
        ttl_ms=None,
        expires_at=None,
        annotations=incoming.annotations,
        properties=incoming.properties,
        application_properties=incoming.application_properties,
        body=incoming.body,
    )
    delivered = stored.encode(locked_until=None)
    bare = incoming.properties + incoming.application_properties + incoming.body
    assert delivered.endswith(bare)
    assert bare in raw


def test_dead_lettering_adds_the_reason_and_keeps_the_other_properties() -> None:
    incoming = parse(_sdk_message())
    stored = Message(9, "m", "s", 1, None, None, [], b"", incoming.application_properties, b"")
    stored.set_properties({"DeadLetterReason": "Bad", "DeadLetterErrorDescription": "why"})
    section = decode_all(stored.application_properties)
    assert section.value == {"n": 1, "DeadLetterReason": "Bad", "DeadLetterErrorDescription": "why"}
