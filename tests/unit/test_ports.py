"""The ports say their contract: every method of every port has a docstring, and the names
mean one thing (the Azure SDK's): ``get`` raises when the thing is missing, ``find`` answers
None instead, and a lookup that may answer None is a ``find``."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable
from typing import Any, Protocol

import pytest

from shared.service_layer import operator_ports, ports

# The session state's None is its value (no state yet), as in the SDK's get_session_state.
STATE_GETTERS = {"SessionActions.get_state"}
# Not lookups: writes whose answer may be None (a conditional write another request took over
# first, the resume of a pipeline that ran already, a lock renewal the host did not date).
CONDITIONAL_WRITES = {
    "IdempotencyRecords.take_over",
    "PipelinePauses.resume",
    "ReceiptEmails.create",
    "SessionActions.renew_lock",
}


def _ports() -> list[type]:
    """Every port: those of each module of the ``ports`` package (a port of your own too) and
    the operator's."""
    modules = [
        importlib.import_module(f"{ports.__name__}.{m.name}")
        for m in pkgutil.iter_modules(ports.__path__)
    ]
    found = []
    for module in (*modules, operator_ports):
        for _, value in vars(module).items():
            if (
                inspect.isclass(value)
                and value.__module__ == module.__name__
                and Protocol in getattr(value, "__mro__", ())[1:]
            ):
                found.append(value)
    return found


def _methods(port: type) -> list[tuple[str, Callable[..., Any]]]:
    return [
        (name, member)
        for name, member in vars(port).items()
        if inspect.isfunction(member) and not name.startswith("_")
    ]


@pytest.mark.parametrize("port", _ports(), ids=lambda p: p.__name__)
def test_every_port_method_says_its_contract(port: type) -> None:
    missing = [name for name, member in _methods(port) if not inspect.getdoc(member)]

    assert missing == []


@pytest.mark.parametrize("port", _ports(), ids=lambda p: p.__name__)
def test_get_raises_when_missing_and_find_may_answer_none(port: type) -> None:
    optional_gets = [
        name
        for name, member in _methods(port)
        if (name == "get" or name.startswith("get_"))
        and f"{port.__name__}.{name}" not in STATE_GETTERS
        and "None" in str(inspect.signature(member).return_annotation)
    ]

    assert optional_gets == [], "a get that may answer None is a find"


@pytest.mark.parametrize("port", _ports(), ids=lambda p: p.__name__)
def test_a_lookup_that_may_answer_none_is_a_find(port: type) -> None:
    unnamed = [
        name
        for name, member in _methods(port)
        if _may_answer_none(member)
        and not name.startswith("find")
        and f"{port.__name__}.{name}" not in STATE_GETTERS | CONDITIONAL_WRITES
    ]

    assert unnamed == [], "a lookup that may answer None is named find"


def _may_answer_none(method: Callable[..., Any]) -> bool:
    returns = str(inspect.signature(method).return_annotation)  # "X | None" (a string)
    return returns != "None" and "None" in returns


def test_there_are_ports_to_check() -> None:
    assert len(_ports()) > 15
