"""The Service Bus extension's settlement client, ``ServiceBusMessageActions``
(``azurefunctions-extensions-bindings-servicebus``), pointed at this host's Settlement service.

The one module of the host that reaches past the extension's public API, as the app's adapter of
the same package does: the class builds its gRPC stub in ``__init__`` from the worker's command
line (``_client``, ``_uri``, ``_grpc_max_message_length``) and keeps one instance for the process
(``_instance`` under ``_lock``). The host serves the Settlement service itself, so it builds an
instance on its own channel and, when the worker shares the host's process, makes its instance
the one the binding hands every function.
"""

from __future__ import annotations

from typing import Any

from azurefunctions.extensions.bindings.protos.settlement_pb2_grpc import SettlementStub
from azurefunctions.extensions.bindings.servicebus import ServiceBusMessageActions


def settlement_actions(channel: Any, address: str) -> ServiceBusMessageActions:
    """A real ``ServiceBusMessageActions`` on ``channel`` (a gRPC channel to a Settlement
    server at ``address``), built without the worker's command line that ``__init__`` reads."""
    actions = object.__new__(ServiceBusMessageActions)
    actions._client = SettlementStub(channel)
    actions._uri = address
    actions._grpc_max_message_length = 4 * 1024 * 1024
    return actions


def install_settlement_actions(actions: ServiceBusMessageActions) -> None:
    """Make ``actions`` the process's instance, the one the binding hands every function."""
    with ServiceBusMessageActions._lock:
        ServiceBusMessageActions._instance = actions
