"""The contract of ``shared/adapters/servicebus_bindings.py``, the app's one module that reaches
past the public API of ``azurefunctions-extensions-bindings-servicebus``: the installed package is
the version the adapter was written for, its settlement methods are still synchronous, what the
adapter reaches for is still there; and no other module reads a private attribute of an Azure
package, but for the local host's copy of the same reach and the dev tooling listed below."""

from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import re
from pathlib import Path

import grpc
import pytest
from azurefunctions.extensions.bindings.servicebus import ServiceBusMessageActions

from shared.adapters import servicebus_bindings
from shared.adapters.servicebus_bindings import (
    PACKAGE,
    PACKAGE_VERSION,
    SETTLEMENT_METHODS,
    installed_version,
    settlement_actions,
)

ROOT = Path(__file__).resolve().parents[2]
ADAPTER = ROOT / "shared" / "adapters" / "servicebus_bindings.py"
CHANGED = (
    f"{PACKAGE} {{installed}} is installed, but shared/adapters/servicebus_bindings.py was "
    f"written for {PACKAGE_VERSION}: {{what}}. Read the new version, move the adapter (and "
    "requirements.txt's pin) to it, and record what changed in the adapter's docstring."
)


def changed(what: str) -> str:
    return CHANGED.format(installed=installed_version(), what=what)


def test_the_installed_package_is_the_version_the_adapter_was_written_for() -> None:
    assert installed_version() == PACKAGE_VERSION, changed("another version")
    requirements = (ROOT / "requirements.txt").read_text()
    assert f"{PACKAGE}=={PACKAGE_VERSION}" in requirements.splitlines()


@pytest.mark.parametrize("method", SETTLEMENT_METHODS)
def test_every_settlement_method_is_still_synchronous(method: str) -> None:
    # An async complete() called as the app calls it would return a coroutine: nothing settled.
    found = getattr(ServiceBusMessageActions, method, None)
    assert callable(found), changed(f"ServiceBusMessageActions.{method} is gone")
    assert not inspect.iscoroutinefunction(found), changed(f"{method} became async")


def test_there_is_still_no_public_session_state_getter() -> None:
    assert not hasattr(ServiceBusMessageActions, "get_session_state"), changed(
        "it has get_session_state: use it and drop the GetSessionState workaround"
    )


def test_what_the_adapter_and_the_local_host_reach_for_is_still_there() -> None:
    for name in ("_instance", "_lock"):
        assert hasattr(ServiceBusMessageActions, name), changed(f"no class attribute {name}")
    source = inspect.getsource(ServiceBusMessageActions.__init__)
    for name in ("_client", "_uri", "_grpc_max_message_length"):
        assert f"self.{name} =" in source or f"self.{name}:" in source, changed(
            f"__init__ no longer sets {name}"
        )
    with grpc.insecure_channel("127.0.0.1:1") as channel:
        actions = settlement_actions(channel, "127.0.0.1:1")
        assert callable(actions._client.GetSessionState), changed("no GetSessionState stub")
        assert callable(actions._client.SetSessionState), changed("no SetSessionState stub")


# -- no private reads of Azure packages elsewhere ----------------------------------------------

AZURE_PACKAGES = ("azure", "azurefunctions")
BINDINGS_PACKAGE = "azurefunctions"
# What runs in Azure and on Databricks: no private read of any Azure package.
SHIPPED = [
    ROOT / "function_app.py",
    *sorted((ROOT / "shared").rglob("*.py")),
    *sorted((ROOT / "spark_jobs").rglob("*.py")),
]
LOCAL_HOST = "packages/functions-local-host"
# The local host (a distribution of its own, which does not import the app) and its sample app
# read the bindings package's internals as the adapter does, each for the reason given.
BINDINGS_READERS = {
    f"{LOCAL_HOST}/src/functions_local_host/message_actions.py": "points the settlement client "
    "at the host's own Settlement service, as the adapter's settlement_actions does, and makes "
    "it the process's instance",
    f"{LOCAL_HOST}/tests/sample_app.py": "reads session state as the adapter's "
    "get_session_state does (no public getter)",
}
# Dev tooling and tests that read azure-servicebus internals on purpose, each for a reason no
# public API serves; a new file reading one fails until it is listed here with its reason. None
# of them reads the bindings package's: that is the adapter's and BINDINGS_READERS' alone.
TOOLING = {
    **BINDINGS_READERS,
    f"{LOCAL_HOST}/src/functions_local_host/servicebus_binding.py": "encodes each message in "
    "AMQP as the .NET extension does (azure-servicebus has no public AMQP encoder); "
    "namedtuple's public _fields",
    "tests/bindings/conftest.py": "builds a received message from AMQP as the binding does",
    "packages/servicebus-emulator/tests/test_emulator_codec.py": "checks the emulator's codec "
    "against the SDK's own",
    "packages/servicebus-emulator/tests/sdk.py": "the HTTP base-URL override Microsoft's "
    "emulator docs give for Python",
    "packages/servicebus-emulator/tests/test_faults.py": "the same documented emulator override",
    "tests/scaleout/receipt_kills.py": "the same documented emulator override (to shorten the "
    "purchase queue's locks)",
    "tests/integration/test_servicebus_sender.py": "reads what a batch holds (no public view)",
    "tests/spark/test_batches.py": "reads what a batch holds (no public view)",
    "tests/integration/test_trace_context.py": "compares with the SDK's own tracing module",
}
SOURCES = [
    path
    for folder in ("shared", "spark_jobs", "localdev", "packages", "tests", "bench", "tools")
    for path in sorted((ROOT / folder).rglob("*.py"))
    if "_rpc" not in path.parts and path not in (ADAPTER, Path(__file__).resolve())
] + [ROOT / "function_app.py"]


def _is_azure(module: str) -> bool:
    return module.split(".")[0] in AZURE_PACKAGES


def _private_members(module: str, name: str) -> dict[str, str]:
    """The private attributes the Azure class ``module.name`` (and its Azure bases) sets on
    itself or its instances, each with its top-level package."""
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return {}
    if not inspect.isclass(found):
        return {}
    members: dict[str, str] = {}
    for cls in found.__mro__:
        if not _is_azure(cls.__module__):
            continue
        package = cls.__module__.split(".")[0]
        names = {m for m in vars(cls) if m.startswith("_") and not m.startswith("__")}
        with contextlib.suppress(OSError, TypeError):
            names |= set(re.findall(r"self\.(_[a-z]\w*)\s*[:=]", inspect.getsource(cls)))
        members.update(dict.fromkeys(names, package))
    return members


def private_reads(path: Path) -> list[tuple[str, str]]:
    """(package, where) of each private read in ``path``: ``name._member`` where ``name`` is an
    Azure import or ``_member`` a private member of an Azure class the module imports, and
    imports of Azure private modules (``azure.servicebus._pyamqp``). ``self._x`` and ``cls._x``
    are the module's own."""
    tree = ast.parse(path.read_text(), filename=str(path))
    azure_names: dict[str, str] = {}
    members: dict[str, str] = {}
    found: list[tuple[str, str]] = []
    where = path.relative_to(ROOT)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and _is_azure(node.module):
            package = node.module.split(".")[0]
            if any(part.startswith("_") for part in node.module.split(".")):
                found.append((package, f"{where}:{node.lineno}: from {node.module}"))
            for alias in node.names:
                azure_names[alias.asname or alias.name] = package
                members.update(_private_members(node.module, alias.name))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _is_azure(alias.name):
                    name = (alias.asname or alias.name).split(".")[0]
                    azure_names[name] = alias.name.split(".")[0]
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
            continue
        if node.attr.startswith("__"):
            continue
        owner = root = node.value
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        owning = members.get(node.attr)
        if isinstance(root, ast.Name) and root.id in azure_names:
            owning = azure_names[root.id]
        if owning:
            found.append((owning, f"{where}:{node.lineno}: {ast.unparse(node)}"))
    return found


def test_no_code_that_ships_reads_a_private_attribute_of_an_azure_package() -> None:
    reads = [read for path in SHIPPED if path != ADAPTER for _, read in private_reads(path)]
    assert reads == []


def test_only_the_adapter_and_the_local_host_read_the_bindings_packages_internals() -> None:
    reads = [
        read
        for path in SOURCES
        if str(path.relative_to(ROOT)) not in BINDINGS_READERS
        for package, read in private_reads(path)
        if package == BINDINGS_PACKAGE
    ]
    assert reads == []


def test_tooling_reads_azure_internals_only_where_listed_with_a_reason() -> None:
    files = {str(path.relative_to(ROOT)) for path in SOURCES if private_reads(path)}
    assert files == set(TOOLING)


def test_the_scan_finds_what_the_adapter_and_the_local_host_read() -> None:
    reads = [read for _, read in private_reads(ADAPTER)]
    assert any("actions._client" in read for read in reads)
    (host,) = [ROOT / path for path in BINDINGS_READERS if path.endswith("message_actions.py")]
    assert any("ServiceBusMessageActions._instance" in read for _, read in private_reads(host))
    assert callable(servicebus_bindings.get_session_state)  # the adapter's public face
