"""The Functions RPC protocol's messages (``AzureFunctionsRpcMessages``), compiled by
``make setup`` into ``_rpc/`` (see rpc_build.py), and the host's conversions of values into
``TypedData`` as the Functions host makes them (GrpcMessageConversionExtensions.ToRpc)."""

from __future__ import annotations

import importlib
import json
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .config import HostConfigurationError


def _compiled(name: str) -> Any:
    # Generated at build time, so imported by name (the checkers do not read generated code;
    # the protocol names two enum values after Python keywords, which typed stubs cannot hold).
    try:
        return importlib.import_module(f"{__package__}._rpc.{name}")
    except ImportError as error:
        raise HostConfigurationError(
            "The Functions RPC protocol is not compiled: run `make setup` "
            f"(or `python {Path(__file__).with_name('rpc_build.py')}`). {error}"
        ) from error


messages = _compiled("FunctionRpc_pb2")
identity_messages = _compiled("ClaimsIdentityRpc_pb2")
nullable_messages = _compiled("NullableTypes_pb2")

# What the worker calls ``protos``: every message type of the protocol in one namespace, as the
# Functions host's Python proxy worker passes it to the library worker.
protos = types.SimpleNamespace(
    **{
        name: value
        for module in (nullable_messages, identity_messages, messages)
        for name, value in vars(module).items()
        if not name.startswith("_")
    }
)

TypedData = messages.TypedData
ParameterBinding = messages.ParameterBinding
StatusResult = messages.StatusResult


def typed_data(value: Any) -> Any:
    """``value`` as the host puts it on the wire: None as empty data, bytes as bytes, str as
    string, float as double, anything else serialized to JSON (like Newtonsoft's defaults)."""
    if value is None:
        return TypedData()
    if isinstance(value, bytes | bytearray):
        return TypedData(bytes=bytes(value))
    if isinstance(value, str):
        return TypedData(string=value)
    if isinstance(value, float):
        return TypedData(double=value)
    return TypedData(json=json.dumps(value, separators=(",", ":"), default=str))


def typed_metadata(values: Mapping[str, Any]) -> dict[str, Any]:
    """Trigger metadata (the trigger's binding data): entries whose value is None are left out,
    as the host leaves them out."""
    return {name: typed_data(value) for name, value in values.items() if value is not None}


def python_value(data: Any) -> Any:
    """The value of ``TypedData`` (a response body or a return value) in Python terms."""
    kind = data.WhichOneof("data") if data is not None else None
    if kind is None:
        return None
    if kind == "json":
        return json.loads(data.json)
    return getattr(data, kind)
