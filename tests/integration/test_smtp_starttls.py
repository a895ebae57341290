"""STARTTLS against a real local SMTP server with a self-signed certificate."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from localdev.azurite import free_port
from shared.domain.errors import PermanentTaskError
from shared.service_layer.ports import Email

from .conftest import SmtpInbox

pytestmark = pytest.mark.integration

EMAIL = Email("ada@example.com", "Over TLS", "hello", "<tls-1@pipelines.local>")


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost: (certificate, key) files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder = tmp_path_factory.mktemp("tls")
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


@pytest.fixture(scope="module")
def tls_inbox(certificate: tuple[Path, Path]) -> Iterator[SmtpInbox]:
    """A real SMTP server that offers STARTTLS and requires it before mail."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)
    inbox = SmtpInbox(host="127.0.0.1", port=free_port())
    controller = Controller(
        inbox,
        hostname=inbox.host,
        port=inbox.port,
        tls_context=context,
        require_starttls=True,
    )
    controller.start()
    try:
        yield inbox
    finally:
        controller.stop()


def test_starttls_with_a_trusted_certificate_delivers(
    tls_inbox: SmtpInbox, certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    tls_inbox.clear()
    # Trust the test certificate the way an operator would: through the default trust store.
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
    sender = tls_inbox.sender(starttls=True)

    sender.send(EMAIL)

    assert [message["Message-ID"] for message in tls_inbox.messages] == ["<tls-1@pipelines.local>"]


def test_an_untrusted_certificate_is_a_permanent_failure(tls_inbox: SmtpInbox) -> None:
    tls_inbox.clear()
    sender = tls_inbox.sender(starttls=True)

    with pytest.raises(PermanentTaskError) as rejected:
        sender.send(EMAIL)

    assert "not trusted" in rejected.value.description
    assert tls_inbox.messages == []


def test_without_starttls_a_server_that_requires_it_rejects_the_mail(tls_inbox: SmtpInbox) -> None:
    tls_inbox.clear()
    sender = tls_inbox.sender()

    with pytest.raises(PermanentTaskError) as rejected:
        sender.send(EMAIL)

    assert rejected.value.reason == "EmailRejected"
    assert tls_inbox.messages == []


def test_starttls_against_a_server_without_it_is_a_permanent_failure(
    smtp_inbox: SmtpInbox,
) -> None:
    sender = smtp_inbox.sender(starttls=True)

    with pytest.raises(PermanentTaskError) as rejected:
        sender.send(EMAIL)

    assert "SMTP_STARTTLS" in rejected.value.description
    assert smtp_inbox.messages == []
