"""The e-mail stand-in (``localdev.email_service``) over HTTP, its requests signed as Azure
Communication Services wants them when a connection string holds the access key:
``Authorization: HMAC-SHA256 SignedHeaders=x-ms-date;host;x-ms-content-sha256&Signature=…``
over ``VERB\\npath?query\\ndate;host;content-hash`` (Microsoft's "Sign an HTTP request"
tutorial, learn.microsoft.com/azure/communication-services/tutorials/hmac-header-tutorial,
and azure-communication-email's ``HMACCredentialsPolicy``). A wrong signature or body hash is
answered ``401``.

Entra ID (bearer) tokens are not taken: the SDK sends them over HTTPS only, and this serves
plain HTTP on the loopback. In Azure the app signs in with its managed identity; locally it
uses this stand-in's connection string, whose access key is public (as Azurite's account key
is), not a secret.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from localdev.email_message import SentEmail
from localdev.email_service import EmailService, Reply, error_reply
from localdev.ports import free_port

DEV_ACCESS_KEY = base64.b64encode(b"local-communication-services-email-access-key").decode()
_AUTHORIZATION = re.compile(
    r"HMAC-SHA256 SignedHeaders=x-ms-date;host;x-ms-content-sha256&Signature=(\S+)"
)


def signature_problem(
    access_key: str, method: str, target: str, headers: Mapping[str, str], body: bytes
) -> str | None:
    """Why the request's HMAC signature does not hold, None when it does (``headers`` by
    lower-case name, ``target`` the request's path and query as sent)."""
    content_hash = base64.b64encode(hashlib.sha256(body).digest()).decode()
    if headers.get("x-ms-content-sha256") != content_hash:
        return "x-ms-content-sha256 is not the SHA-256 of the body"
    match = _AUTHORIZATION.fullmatch(headers.get("authorization", ""))
    if match is None:
        return "Authorization is not an HMAC-SHA256 signature of x-ms-date;host;x-ms-content-sha256"
    signed = f"{method}\n{target}\n{headers.get('x-ms-date', '')};{headers.get('host', '')};"
    digest = hmac.new(
        base64.b64decode(access_key), (signed + content_hash).encode(), hashlib.sha256
    ).digest()
    if not hmac.compare_digest(base64.b64encode(digest).decode(), match.group(1)):
        return "the signature does not match the access key"
    return None


@dataclass
class RunningEmailService:
    """The stand-in listening on ``host:port``; reads its mailbox as the SMTP sink's is read."""

    host: str
    port: int
    service: EmailService
    access_key: str = DEV_ACCESS_KEY

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def connection_string(self) -> str:
        """What ``EmailClient.from_connection_string`` takes to reach this stand-in."""
        return f"endpoint={self.endpoint}/;accesskey={self.access_key}"

    def sent(self) -> list[SentEmail]:
        return self.service.sent()

    def received(self) -> list[EmailMessage]:
        return self.service.received()

    def count(self) -> int:
        return self.service.count()

    def message_ids(self, start: int = 0) -> list[str]:
        return self.service.message_ids(start)

    def wait_for_more(self, count: int, timeout: float) -> bool:
        return self.service.wait_for_more(count, timeout)


def _handler(running: RunningEmailService) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self._answer("POST")

        def do_GET(self) -> None:
            self._answer("GET")

        def _answer(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {name.lower(): value for name, value in self.headers.items()}
            target = urlsplit(self.path)
            versions = parse_qs(target.query).get("api-version") or []
            api_version = versions[0] if versions else None
            problem = signature_problem(running.access_key, method, self.path, headers, body)
            service = running.service
            if problem is not None:
                reply = error_reply(401, "Unauthorized", f"Denied: {problem}.")
            elif method == "POST" and target.path == "/emails:send":
                reply = service.send(api_version, headers, body)
            elif method == "GET" and target.path.startswith("/emails/operations/"):
                reply = service.operation(api_version, target.path.rsplit("/", 1)[1])
            else:
                reply = error_reply(404, "NotFound", f"{method} {target.path} is not served here.")
            self._send(reply, headers.get("x-ms-client-request-id"))

        def _send(self, reply: Reply, client_request_id: str | None) -> None:
            payload = b"" if reply.body is None else json.dumps(reply.body).encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("x-ms-request-id", str(uuid.uuid4()))
            if client_request_id:
                self.send_header("x-ms-client-request-id", client_request_id)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the host logs each invocation; a line per request here would drown it

    return Handler


@contextmanager
def run_email_service(
    port: int | None = None, *, host: str = "127.0.0.1", **options: Any
) -> Iterator[RunningEmailService]:
    """Serve an ``EmailService`` (``options`` are its keywords) on ``host:port`` (a free port
    when ``None``) until the block ends."""
    chosen = port or free_port(host)
    running = RunningEmailService(
        host, chosen, EmailService(base_url=f"http://{host}:{chosen}", **options)
    )
    server = ThreadingHTTPServer((host, chosen), _handler(running))
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, args=(0.05,), name="email stand-in", daemon=True
    )
    thread.start()
    try:
        yield running
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def main() -> None:
    """``python -m localdev.email_http [--port 7075]``: the stand-in in the foreground, one
    ``[email]`` line per message, for ``func start`` and the containers of
    infra/local/docker-compose.yml (its connection string is printed)."""
    import argparse
    import time

    parser = argparse.ArgumentParser(prog="python -m localdev.email_http", description=main.__doc__)
    parser.add_argument("--port", type=int, default=7075)
    port = parser.parse_args().port
    with run_email_service(port, echo=True) as running:
        print(f"CommunicationServicesConnection={running.connection_string}", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
