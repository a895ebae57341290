"""Which e-mail addresses the API accepts: exactly those the receipt can be mailed to."""

from __future__ import annotations

import pytest

from shared.domain.errors import InvalidInput
from shared.domain.mailboxes import parse_mailbox
from shared.domain.orders import parse_order
from tests.builders import order_document

MAILABLE = {
    "plain": ("ada.lovelace+shop@example.com", "ada.lovelace+shop@example.com", False),
    "upper-case domain": ("Ada@EXAMPLE.com", "Ada@example.com", False),
    "non-ASCII domain": ("ada@bücher.example", "ada@xn--bcher-kva.example", False),
    "IDNA 2008, not 2003": ("ada@straße.de", "ada@xn--strae-oqa.de", False),
    "non-ASCII local part": ("jösé@exämple.com", "jösé@exämple.com", True),
    "emoji local part": ("🚀@example.com", "🚀@example.com", True),
    "specials, quoted": ("a<b>,c@example.com", '"a<b>,c"@example.com', False),
    "two dots, quoted": ("a..b@example.com", '"a..b"@example.com', False),
    "64 octets": ("é" * 32 + "@example.com", "é" * 32 + "@example.com", True),
}


@pytest.mark.parametrize("case", MAILABLE, ids=list(MAILABLE))
def test_a_mailable_address_is_written_as_an_smtp_mailbox(case: str) -> None:
    text, address, needs_smtputf8 = MAILABLE[case]

    mailbox = parse_mailbox(text)

    assert mailbox.address() == address
    assert mailbox.needs_smtputf8 is needs_smtputf8
    assert parse_order(order_document(customer_email=text)).customer_email == text


NOT_MAILABLE = {
    "no at": ("ada.example.com", "e-mail address like"),
    "two ats": ("ada@home@example.com", "exactly one @"),
    "no domain dot": ("ada@localhost", "no domain with a dot"),
    "a space": ("ada lovelace@example.com", "spaces"),
    "a control character": ("ada\x01@example.com", "U+0001"),
    "a lone surrogate": ("ada\ud800@example.com", "U+D800"),
    "a line separator": ("ada\u2028@example.com", "U+2028"),
    "an underscore in the domain": ("ada@mail_server.example", "not a host name"),
    "an address literal": ("ada@[192.0.2.1]", "not a host name"),
    "a trailing dot": ("ada@example.com.", "not a host name"),
    "an emoji domain": ("ada@🚀.example", "not a host name"),
    "a label of 64": ("ada@" + "a" * 64 + ".com", "not a host name"),
    "a quoted local part": ('"a\\"b"@example.com', "a quote"),
    "a quoted dot-string": ('"ada"@example.com', "a quote"),
    "a quote": ('a"b@example.com', "a quote"),
    "a backslash": ("a\\b@example.com", "a backslash"),
    "a right-to-left override": ("ada\u202emoc.elpmaxe@example.com", "U+202E"),
    "a bidi isolate in the domain": ("ada@exa\u2067mple.com", "U+2067"),
    "a zero-width joiner": ("ad\u200da@example.com", "format character U+200D"),
    "a local part of 65 octets": ("a" * 65 + "@example.com", "longer than 64 bytes"),
    "33 two-byte letters": ("é" * 33 + "@example.com", "longer than 64 bytes"),
}


@pytest.mark.parametrize("case", NOT_MAILABLE, ids=list(NOT_MAILABLE))
def test_an_address_no_mail_server_could_take_is_refused_naming_the_field(case: str) -> None:
    text, problem = NOT_MAILABLE[case]

    with pytest.raises(InvalidInput) as refused:
        parse_order(order_document(customer_email=text))

    assert refused.value.field == "customer_email"
    assert problem in refused.value.problem
