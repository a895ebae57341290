"""Rewriting one section of a stored message keeps every other value's bytes."""

from __future__ import annotations

from servicebus_emulator.codec import Described, Symbol, UInt, ULong, decode_all, encode
from servicebus_emulator.message import parse
from servicebus_emulator.sections import (
    APPLICATION_PROPERTIES,
    PROPERTIES,
    list_items,
    raw_map_items,
    with_map_items,
)


def section(code: int, value: object) -> bytes:
    return encode(Described(ULong(code), value))


def test_a_broker_assigned_message_id_replaces_only_the_first_property() -> None:
    properties = section(
        PROPERTIES, [None, None, "to", "subject", None, None, Symbol("text/plain"), None]
    )
    incoming = parse(properties + section(0x75, b"body"))
    assert incoming.message_id is None

    incoming.assign_message_id("assigned")

    assert incoming.message_id == "assigned"
    fields = decode_all(incoming.properties).value
    assert fields[0] == "assigned"
    assert list_items(incoming.properties)[1:] == list_items(properties)[1:]


def test_a_message_without_a_properties_section_gets_one_for_its_id() -> None:
    incoming = parse(section(0x75, b"body"))
    incoming.assign_message_id("assigned")
    assert decode_all(incoming.properties).value == ["assigned"]


def test_properties_to_modify_replace_add_and_remove_keeping_the_others_bytes() -> None:
    original = section(APPLICATION_PROPERTIES, {"keep": UInt(7), "change": "old", "drop": 1})

    changed = with_map_items(original, APPLICATION_PROPERTIES, {"change": "new"}, ["drop"])

    assert decode_all(changed).value == {"keep": 7, "change": "new"}
    kept = dict(raw_map_items(original))["keep"]
    assert dict(raw_map_items(changed))["keep"] == kept  # still a uint, byte for byte
