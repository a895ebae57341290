"""The one place that reaches past the public API of the Python worker's Service Bus SDK-type
binding, ``azurefunctions-extensions-bindings-servicebus``, written for exactly
``PACKAGE_VERSION``.

What it reaches for, and why:

- ``get_session_state``: ``ServiceBusMessageActions`` has ``set_session_state`` but no getter,
  although the host's Settlement service defines ``GetSessionState``. Used when the class has no
  public getter: the request goes to the gRPC stub the instance holds (``_client``).
- ``settlement_actions`` (for tests that serve the Settlement service themselves, as the
  Functions host does): the class builds its stub in ``__init__`` from the worker's command
  line (``_client``, ``_uri``, ``_grpc_max_message_length``). The local host
  (packages/functions-local-host, which imports no app) has its own copy of this reach, and
  also makes its instance the process's one (``_instance`` under ``_lock``).

``tests/bindings/test_servicebus_bindings_contract.py`` fails, naming the installed version,
when the package is not ``PACKAGE_VERSION`` or any of that has moved: its settlement methods must
stay synchronous (an ``async`` ``complete`` called as today would return a coroutine and settle
nothing).

Newer versions checked (2026-11): PyPI has none after 1.0.0b2 (1.0.0.dev1, 1.0.0b1, 1.0.0b2).
The package's repository (Azure/azure-functions-python-extensions,
``azurefunctions-extensions-bindings-servicebus/.../serviceBusMessageActions.py``) adds a
``properties_to_modify`` argument to ``abandon``, ``deadletter`` and ``defer``, still has no
session-state getter, and its class docstring announces async settlement methods; the pyproject
there requires protobuf>=6.32 and grpcio>=1.74. Re-check this list when moving the pin.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

from azurefunctions.extensions.bindings.protos.settlement_pb2 import GetSessionStateRequest
from azurefunctions.extensions.bindings.protos.settlement_pb2_grpc import SettlementStub
from azurefunctions.extensions.bindings.servicebus import ServiceBusMessageActions
from azurefunctions.extensions.bindings.servicebus.serviceBusMessageActions import (
    SettlementError,
)

PACKAGE = "azurefunctions-extensions-bindings-servicebus"
PACKAGE_VERSION = "1.0.0b2"
# The settlement methods the app and the local host call, synchronously.
SETTLEMENT_METHODS = (
    "complete",
    "abandon",
    "deadletter",
    "defer",
    "set_session_state",
    "release_session",
    "renew_session_lock",
    "renew_message_lock",
)


def installed_version() -> str:
    return importlib.metadata.version(PACKAGE)


def get_session_state(actions: ServiceBusMessageActions, session_id: str) -> bytes:
    """The session's state (``b""`` when it has none), through the class's own getter when it
    has one, else over the Settlement service's ``GetSessionState``. Errors surface as the
    extension's ``SettlementError``, as its own methods raise them."""
    getter = getattr(actions, "get_session_state", None)
    if getter is not None:
        return bytes(getter(session_id) or b"")
    try:
        request = GetSessionStateRequest()
        request.sessionId = session_id
        response = actions._client.GetSessionState(request)
    except Exception as error:
        raise SettlementError(
            "get_session_state", f"Failed to get state for session {session_id}", error
        ) from error
    return bytes(response.sessionState)


def settlement_actions(channel: Any, address: str) -> ServiceBusMessageActions:
    """A real ``ServiceBusMessageActions`` on ``channel`` (a gRPC channel to a Settlement
    server at ``address``), built without the worker's command line that ``__init__`` reads."""
    actions = object.__new__(ServiceBusMessageActions)
    actions._client = SettlementStub(channel)
    actions._uri = address
    actions._grpc_max_message_length = 4 * 1024 * 1024
    return actions
