"""E-mail addresses the app can mail: SMTP mailboxes (RFC 5321), internationalised (RFC 6531).

An address is accepted only when it can be written on the SMTP envelope as it was given: a
local part of at most 64 octets without control or format characters (bidi overrides among
them, which would show the address reversed) and without a quote or a backslash, quoted on the
envelope when it is not a plain dot-string (a quoted local part as sent, ``"a\\"b"@...``, is
refused: quoting it again would name another mailbox, and unquoting it would change what the
customer typed), and a domain of host-name labels, non-ASCII labels included (IDNA 2008 with
the UTS #46 mapping, as browsers and mail servers resolve them; their ASCII form is xn--...).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import idna

from .errors import InvalidInput

MAX_LOCAL_OCTETS = 64
MAX_DOMAIN_OCTETS = 253
_ATEXT = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]|[^\x00-\x7f]")
_LABEL = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
# Control characters, lone surrogates, line and paragraph separators: nothing an SMTP
# envelope or a header can carry. Format characters (U+202E and the other bidi controls,
# zero-width joiners): invisible, they make an address read as another.
_FORBIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


@dataclass(frozen=True)
class Mailbox:
    local: str  # as the customer wrote it, without quotes
    domain: str  # its Unicode form, possibly with non-ASCII labels
    ascii_domain: str  # the same domain in IDNA form

    @property
    def needs_smtputf8(self) -> bool:
        """Only a non-ASCII local part needs a server with SMTPUTF8: the domain always has
        its ASCII form."""
        return not self.local.isascii()

    def address(self) -> str:
        """local@domain as it goes on the envelope and in the To header: the local part as a
        dot-string when it is one, else quoted; the domain in IDNA form when the local part is
        ASCII (so no SMTPUTF8 is needed), in its Unicode form otherwise."""
        domain = self.ascii_domain if not self.needs_smtputf8 else self.domain
        return f"{_smtp_local(self.local)}@{domain}"


def parse_mailbox(text: str, *, field: str = "email") -> Mailbox:
    """The mailbox ``text`` names, or ``InvalidInput`` naming ``field`` and what is wrong."""
    local, at, domain = text.rpartition("@")
    if not at or not local or not domain:
        raise InvalidInput(field, "must be an e-mail address like ada@example.com")
    if "@" in local:
        raise InvalidInput(field, "must hold exactly one @")
    bad = next((c for c in text if unicodedata.category(c) in _FORBIDDEN), None)
    if bad is not None:
        kind = "format" if unicodedata.category(bad) == "Cf" else "control"
        raise InvalidInput(field, f"must not contain the {kind} character U+{ord(bad):04X}")
    if any(c.isspace() for c in text):
        raise InvalidInput(field, "must not contain spaces")
    if '"' in local or "\\" in local:
        raise InvalidInput(
            field, 'must not contain a quote (") or a backslash before the @: write it unquoted'
        )
    if len(local.encode("utf-8")) > MAX_LOCAL_OCTETS:
        raise InvalidInput(
            field, f"has a part before the @ longer than {MAX_LOCAL_OCTETS} bytes (UTF-8)"
        )
    ascii_domain = _ascii_domain(domain, field)
    return Mailbox(local, idna.decode(ascii_domain), ascii_domain)


def _ascii_domain(domain: str, field: str) -> str:
    labels = domain.split(".")
    if len(labels) < 2:
        raise InvalidInput(field, f"has no domain with a dot after the @ ({domain!r})")
    try:
        ascii_domain = idna.encode(domain, uts46=True, std3_rules=True).decode("ascii")
    except idna.IDNAError as error:
        raise InvalidInput(
            field,
            f"has a domain that is not a host name ({domain!r}: {error}); each part between "
            "dots must be letters, digits or hyphens",
        ) from error
    if not all(_LABEL.match(label) for label in ascii_domain.split(".")):
        raise InvalidInput(field, f"has a domain that is not a host name ({domain!r})")
    if len(ascii_domain) > MAX_DOMAIN_OCTETS:
        raise InvalidInput(field, f"has a domain longer than {MAX_DOMAIN_OCTETS} characters")
    return ascii_domain


def _smtp_local(local: str) -> str:
    """A dot-string stays as it is; anything else becomes a quoted string (RFC 5321 4.1.2)."""
    atoms = local.split(".")
    if all(atoms) and all(_ATEXT.fullmatch(c) for atom in atoms for c in atom):
        return local
    escaped = local.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
