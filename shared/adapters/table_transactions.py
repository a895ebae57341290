"""Entity-group transactions of upserts, sent as Table Storage documents its ``$batch``
request, without azure-data-tables' multipart code.

Why hand-written: azure-data-tables builds a transaction's body with the standard library's
e-mail package, reads the answer with it, and runs each part's policies on a thread pool that
azure-core creates for every transaction (``Pipeline._prepare_multipart_mixed_request``). For
an import batch (eight transactions of about twelve products) that is about 1 ms of CPU per row,
most of the batch's write. Here the same request is written out and its answer read directly,
through an azure-core pipeline of public policies (retries, the app's request counter, Shared
Key or Microsoft Entra authorization). Every other request stays with the SDK.

What is sent: https://learn.microsoft.com/rest/api/storageservices/performing-entity-group-transactions
(a ``multipart/mixed`` body holding one changeset, each operation an ``application/http``
part: ``PUT`` for an upsert that replaces, ``MERGE`` for one that merges, neither with
``If-Match``), entities in the JSON format with ``@odata.type`` annotations as the SDK writes
them, and Shared Key authorization as
https://learn.microsoft.com/rest/api/storageservices/authorize-with-shared-key documents it for
the Table service. An answer other than 202, or a changeset whose first failed operation is
not 2xx, raises ``HttpResponseError`` with that status (and the service's error code in its
message): the transaction wrote nothing (``azure_errors`` maps it as any SDK error).
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import json
import math
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from email.utils import formatdate
from typing import Any
from urllib.parse import quote, urlsplit

from azure.core import PipelineClient
from azure.core.credentials import TokenCredential
from azure.core.exceptions import HttpResponseError
from azure.core.pipeline import PipelineRequest
from azure.core.pipeline.policies import (
    BearerTokenCredentialPolicy,
    CustomHookPolicy,
    RequestIdPolicy,
    RetryPolicy,
    SansIOHTTPPolicy,
    UserAgentPolicy,
)
from azure.core.rest import HttpRequest
from azure.data.tables import UpdateMode

API_VERSION = "2019-02-02"  # what azure-data-tables 12 sends
STORAGE_SCOPE = "https://storage.azure.com/.default"
_INT32 = range(-(2**31), 2**31)
_STATUS_LINE = re.compile(rb"^HTTP/1\.1 (\d{3})", re.M)


class SharedKeyPolicy(SansIOHTTPPolicy[Any, Any]):
    """Shared Key authorization of a Table service request: ``x-ms-date``, then the
    signature of the verb, Content-MD5, Content-Type, that date and the canonical resource
    (``/<account><path>``)."""

    def __init__(self, account_name: str, account_key: str) -> None:
        self._account = account_name
        self._key = base64.b64decode(account_key)

    def on_request(self, request: PipelineRequest[Any]) -> None:
        http = request.http_request
        http.headers["x-ms-date"] = formatdate(usegmt=True)
        headers = {name.lower(): value for name, value in http.headers.items()}
        to_sign = "\n".join(
            (
                http.method,
                headers.get("content-md5", ""),
                headers.get("content-type", ""),
                headers["x-ms-date"],
                f"/{self._account}{urlsplit(http.url).path}",
            )
        )
        digest = hmac.new(self._key, to_sign.encode("utf-8"), hashlib.sha256).digest()
        signature = base64.b64encode(digest).decode()
        http.headers["Authorization"] = f"SharedKey {self._account}:{signature}"


class TableTransactions:
    """Upserts of one partition in one request per call, on the account at ``endpoint``
    (``https://<account>.table.core.windows.net``, or Azurite's ``http://host:port/<account>``).
    ``authorization``: ``SharedKeyPolicy`` or a bearer-token policy; ``on_request``: called
    with each request sent, retries included (the app's Storage request counter)."""

    def __init__(
        self,
        endpoint: str,
        authorization: SansIOHTTPPolicy[Any, Any] | BearerTokenCredentialPolicy,
        *,
        on_request: Callable[[PipelineRequest[Any]], None] | None = None,
    ) -> None:
        self.endpoint = endpoint.rstrip("/")
        policies: list[Any] = [
            UserAgentPolicy(sdk_moniker="pipeline-table-transactions"),
            RequestIdPolicy(),
            RetryPolicy(),
            authorization,
        ]
        if on_request is not None:
            policies.append(CustomHookPolicy(raw_request_hook=on_request))
        self._client: PipelineClient[HttpRequest, Any] = PipelineClient(
            self.endpoint, policies=policies
        )

    @classmethod
    def with_shared_key(
        cls,
        endpoint: str,
        account_name: str,
        account_key: str,
        *,
        on_request: Callable[[PipelineRequest[Any]], None] | None = None,
    ) -> TableTransactions:
        return cls(endpoint, SharedKeyPolicy(account_name, account_key), on_request=on_request)

    @classmethod
    def with_credential(
        cls,
        endpoint: str,
        credential: TokenCredential,
        *,
        on_request: Callable[[PipelineRequest[Any]], None] | None = None,
    ) -> TableTransactions:
        return cls(
            endpoint, BearerTokenCredentialPolicy(credential, STORAGE_SCOPE), on_request=on_request
        )

    def upsert(self, table: str, entities: Sequence[Mapping[str, Any]], mode: UpdateMode) -> None:
        """Create or replace (``REPLACE``) or create or merge (``MERGE``) ``entities``, all of
        one partition, at most 100, in one transaction: all written, or none and
        ``HttpResponseError``."""
        batch, changeset = f"batch_{uuid.uuid4()}", f"changeset_{uuid.uuid4()}"
        method = "PUT" if mode is UpdateMode.REPLACE else "MERGE"
        parts = [
            _operation(changeset, method, f"{self.endpoint}/{table}", entity) for entity in entities
        ]
        body = (
            f"--{batch}\r\nContent-Type: multipart/mixed; boundary={changeset}\r\n\r\n".encode()
            + b"".join(parts)
            + f"--{changeset}--\r\n\r\n--{batch}--\r\n".encode()
        )
        request = HttpRequest(
            "POST",
            f"{self.endpoint}/$batch",
            headers={
                "x-ms-version": API_VERSION,
                "DataServiceVersion": "3.0",
                "MaxDataServiceVersion": "3.0;NetFx",
                "Content-Type": f"multipart/mixed; boundary={batch}",
                "Accept": "application/json",
            },
            content=body,
        )
        response = self._client.send_request(request)
        if response.status_code != 202:
            raise HttpResponseError(response=response)
        _raise_for_failed_operation(response.read())


def _operation(changeset: str, method: str, table_url: str, entity: Mapping[str, Any]) -> bytes:
    """One operation of the changeset: its part's headers, its request line and headers,
    the entity as JSON."""
    keys = f"(PartitionKey='{_key(entity['PartitionKey'])}',RowKey='{_key(entity['RowKey'])}')"
    payload = json.dumps(_entity_json(entity)).encode()
    return (
        (
            f"--{changeset}\r\n"
            "Content-Type: application/http\r\n"
            "Content-Transfer-Encoding: binary\r\n\r\n"
            f"{method} {table_url}{keys} HTTP/1.1\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n"
            f"x-ms-version: {API_VERSION}\r\n"
            "DataServiceVersion: 3.0\r\n"
            "Accept: application/json\r\n\r\n"
        ).encode()
        + payload
        + b"\r\n"
    )


def _key(value: Any) -> str:
    """A key in an entity's address: quotes doubled (OData), then percent-encoded."""
    return quote(str(value).replace("'", "''"), safe="")


def _entity_json(entity: Mapping[str, Any]) -> dict[str, Any]:
    """The entity as Table Storage's JSON, typed as azure-data-tables types it: strings,
    doubles, dates, binaries and GUIDs annotated with ``@odata.type``, 32-bit integers and
    booleans as they are; ``None`` values left out."""
    properties: dict[str, Any] = {}
    for name, value in entity.items():
        if value is None:
            continue
        edm, value = _typed(value)
        properties[name] = value
        if edm is not None:
            properties[f"{name}@odata.type"] = edm
    return properties


def _typed(value: Any) -> tuple[str | None, Any]:
    if isinstance(value, bool):
        return None, value
    if isinstance(value, enum.Enum):
        return "Edm.String", str(value.value)
    if isinstance(value, str):
        return "Edm.String", value
    if isinstance(value, int):
        if value not in _INT32:
            raise TypeError(f"{value} is too large to be cast to type Edm.Int32")
        return None, value
    if isinstance(value, float):
        if math.isnan(value):
            return "Edm.Double", "NaN"
        if math.isinf(value):
            return "Edm.Double", "Infinity" if value > 0 else "-Infinity"
        return "Edm.Double", value
    if isinstance(value, datetime):
        moment = value.astimezone(UTC) if value.tzinfo else value
        return "Edm.DateTime", moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, bytes):
        return "Edm.Binary", base64.b64encode(value).decode()
    if isinstance(value, uuid.UUID):
        return "Edm.Guid", str(value)
    raise TypeError(f"Type not supported when sending data to the service: {type(value)}.")


def _raise_for_failed_operation(body: bytes) -> None:
    """The changeset's answer: each operation's status line; the first that is not 2xx
    (the service answers a failed transaction with that operation alone) raises."""
    for found in _STATUS_LINE.finditer(body):
        status = int(found.group(1))
        if 200 <= status < 300:
            continue
        code, message = _error(body[found.end() :])
        error = HttpResponseError(message=f"{status} {code}: {message}")
        error.status_code = status
        raise error


def _error(rest: bytes) -> tuple[str, str]:
    """The service's error code and message from the JSON after a failed status line."""
    start = rest.find(b"{")
    if start < 0:
        return "Unknown", ""
    try:
        document, _ = json.JSONDecoder().raw_decode(rest[start:].decode("utf-8", "replace"))
        error = document["odata.error"]
        return str(error["code"]), str(error["message"]["value"])
    except (ValueError, KeyError, TypeError):
        return "Unknown", ""
