"""Request bodies read strictly: every hostile body is refused with the field and the limit,
before any conversion that could hang, crash or pass bad text on."""

from __future__ import annotations

import pytest

from shared.domain.errors import InvalidInput
from shared.domain.json_documents import (
    MAX_DEPTH,
    MAX_NUMBER_DIGITS,
    NotAnObject,
    NotJson,
    parse_json_object,
)
from shared.domain.orders import parse_order
from tests.builders import order_document

EXAMPLE = '{"task": "..."}'


def refused(body: bytes) -> InvalidInput:
    with pytest.raises(InvalidInput) as error:
        parse_json_object(body, example=EXAMPLE)
    return error.value


def test_a_plain_object_is_read() -> None:
    assert parse_json_object(b'{"a": [1, 2.5, "x", null, true]}', example=EXAMPLE) == {
        "a": [1, 2.5, "x", None, True]
    }


def test_nesting_is_refused_before_the_parser_recurses() -> None:
    error = refused(b"[" * 20_000 + b"]" * 20_000)

    assert error.field == "body" and "20000 deep" in error.problem
    assert f"at most {MAX_DEPTH}" in error.problem


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    body = b'{"s": "' + b"[{" * 100 + b'\\"]"}'
    assert parse_json_object(body, example=EXAMPLE)["s"].startswith("[{")


def test_a_member_twice_in_one_object_is_refused_by_name() -> None:
    error = refused(b'{"lines": [{"sku": "A", "sku": "B"}]}')

    assert (error.field, error.problem) == ("sku", "appears twice in one object; send it once")


def test_a_long_number_is_refused_by_its_path_without_being_converted() -> None:
    error = refused(b'{"lines": [{"quantity": ' + b"9" * 5_000 + b"}]}")

    assert error.field == "lines[0].quantity"
    assert error.problem == f"is a number of 5000 characters; at most {MAX_NUMBER_DIGITS}"


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity"])
def test_nan_and_infinity_are_not_numbers(literal: bytes) -> None:
    assert "not a JSON number" in refused(b'{"x": ' + literal + b"}").problem


def test_a_number_out_of_range_is_refused() -> None:
    assert refused(b'{"x": 1e999}').problem == "is a number out of range"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"customer_name": "\\ud800"}', "customer_name"),
        (b'{"lines": [{"sku": "A\\udfff"}]}', "lines[0].sku"),
        (b'{"\\ud800": 1}', "\\ud800"),
    ],
)
def test_a_lone_surrogate_is_refused_naming_where_it_is(body: bytes, field: str) -> None:
    error = refused(body)

    assert error.field == field
    assert "lone surrogate" in error.problem


def test_a_surrogate_pair_is_one_character_and_welcome() -> None:
    assert parse_json_object(b'{"n": "\\ud83c\\udf75"}', example=EXAMPLE) == {"n": "\U0001f375"}


@pytest.mark.parametrize(
    ("body", "kind"),
    [(b"\xff\xfe{}", NotJson), (b"{not json", NotJson), (b"", NotJson), (b"[1]", NotAnObject)],
)
def test_what_is_not_one_utf8_json_object_is_refused(body: bytes, kind: type) -> None:
    error = refused(body)

    assert isinstance(error, kind) and error.field == "body"
    assert EXAMPLE in error.problem or "UTF-8" in error.problem


ORDER = order_document()


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        ({"customer_name": "\ud800"}, "customer_name", "lone surrogate"),
        ({"customer_email": "a" * 65 + "@example.com"}, "customer_email", "longer than 64"),
        ({"customer_email": "ad\x85a@example.com"}, "customer_email", "control character U+"),
    ],
)
def test_an_order_that_could_not_be_mailed_is_refused(
    change: dict[str, str], field: str, problem: str
) -> None:
    with pytest.raises(InvalidInput) as error:
        parse_order({**ORDER, **change})

    assert error.value.field == field and problem in error.value.problem


def test_any_other_text_is_accepted_as_it_is() -> None:
    # Bidi controls (U+202E) are the exception: test_domain's orders that read otherwise.
    name = "Zoë <b>Łukasz</b> & 山田 🍵 \u200devil"
    assert parse_order({**ORDER, "customer_name": name}).customer_name == name
