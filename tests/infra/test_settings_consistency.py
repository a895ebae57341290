"""The app settings the code reads are exactly those infra defines, and every one is in
local.settings.json.example and the docs.

What the code reads is found by parsing the sources, not by a list kept here:
- ``env.<kind>("NAME", ...)`` calls (shared/config.py's reader) and ``os.environ``/``os.getenv``;
- ``%NAME%`` references in binding arguments (``queue_name="%REPLAY_QUEUE_NAME%"``);
- each declared pipeline's queue setting (``shared.domain.pipelines``: its session
  trigger's ``%NAME%`` and the settings read it from the declaration);
- connections: ``connection="..."`` arguments and the ``*_CONNECTION = "..."`` constants, with
  the ``f"{name}__suffix"`` parts the config reads (``__fullyQualifiedNamespace``, ...).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field

import pytest

from tests.builders import PIPELINES

from .conftest import INFRA, ROOT

SOURCES = [ROOT / "function_app.py", *sorted((ROOT / "shared").rglob("*.py"))]

# Settings the platform reads, not the app's code; allowed in infra / local settings.
PLATFORM_SETTINGS = {
    # local.settings.json only: on Flex the runtime is functionAppConfig.runtime
    "FUNCTIONS_WORKER_RUNTIME",
    "AzureWebJobsFeatureFlags",
    "APPLICATIONINSIGHTS_CONNECTION_STRING",  # the host's telemetry
    "APPLICATIONINSIGHTS_AUTHENTICATION_STRING",  # Entra auth for telemetry (local auth off)
    "PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY",  # the Python worker sets up the distro
    "OTEL_TRACES_SAMPLER",  # the distro's sampler (every trace kept: docs/telemetry.md)
    "OTEL_TRACES_SAMPLER_ARG",
    "PYTHON_THREADPOOL_THREAD_COUNT",  # the worker's thread pool for synchronous functions
}
# Read by the app only where the crash tests set it (a fault-injection point, off unless set,
# shared/bootstrap/faults.py): in local.settings.json.example and the docs, never in Azure.
LOCAL_ONLY_SETTINGS = {"FAULT_HOLD_AFTER_RECEIPT_SENT"}
# Parts of an identity-based connection that the host's credential factory reads.
PLATFORM_CONNECTION_SUFFIXES = {"credential"}


@dataclass
class CodeSettings:
    names: set[str] = field(default_factory=set)
    connections: set[str] = field(default_factory=set)
    connection_suffixes: set[str] = field(default_factory=set)


def _const_str(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def scan_code() -> CodeSettings:
    found = CodeSettings()
    for path in SOURCES:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                first = _const_str(node.args[0]) if node.args else None
                if isinstance(func, ast.Attribute) and first:
                    if ast.unparse(func.value) == "env":  # shared/config.py's _Reader
                        found.names.add(first)
                    if ast.unparse(func) in ("os.getenv", "os.environ.get"):
                        found.names.add(first)
                for kw in node.keywords:
                    value = _const_str(kw.value)
                    if value is None:
                        continue
                    if kw.arg == "connection":
                        found.connections.add(value)
                    found.names.update(re.findall(r"%(\w+)%", value))
            elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
                if name := _const_str(node.slice):
                    found.names.add(name)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                value = _const_str(node.value)
                if isinstance(target, ast.Name) and target.id.endswith("_CONNECTION") and value:
                    found.connections.add(value)
            elif isinstance(node, ast.JoinedStr):
                for part in node.values:
                    text = _const_str(part)
                    if text and (m := re.fullmatch(r"__(\w+)", text)):
                        found.connection_suffixes.add(m.group(1))
    found.names.update(pipeline.queue_setting for pipeline in PIPELINES)
    return found


def infra_settings() -> set[str]:
    """function.bicep's app settings: its ``appSettings`` list, and the pipelines' queue
    settings it reads from infra/app-resources.json (``pipelineQueueSettings``)."""
    text = (INFRA / "app" / "function.bicep").read_text()
    assert "appSettings: concat(pipelineQueueSettings, appSettings)" in text
    assert "loadJsonContent('../app-resources.json').pipelines" in text
    block = re.search(r"^var appSettings = \[(.*?)\n\]", text, re.DOTALL | re.MULTILINE)
    assert block, "function.bicep has no appSettings list"
    pipelines = json.loads((INFRA / "app-resources.json").read_text())["pipelines"]
    return set(re.findall(r"\{ name: '([^']+)', value:", block.group(1))) | {
        p["queueSetting"] for p in pipelines
    }


def local_example_settings() -> set[str]:
    path = ROOT / "local.settings.json.example"
    return set(json.loads(path.read_text())["Values"])


def docs_text() -> str:
    return "\n".join(
        p.read_text() for p in (ROOT / "docs" / "deploy.md", ROOT / "README.md") if p.exists()
    )


@pytest.fixture(scope="module")
def code() -> CodeSettings:
    return scan_code()


def test_the_scan_finds_what_the_code_reads(code: CodeSettings) -> None:
    # A guard on the scanner itself: these are certainly read.
    assert {"PURCHASE_QUEUE_NAME", "IMPORT_QUEUE_NAME", "REPLAY_QUEUE_NAME"} <= code.names
    assert {"ServiceBusConnection", "AzureWebJobsStorage"} <= code.connections
    assert {"fullyQualifiedNamespace", "accountName", "clientId"} <= code.connection_suffixes


def _split(defined: set[str], code: CodeSettings) -> tuple[set[str], set[str], set[str]]:
    """(plain names, connections present, names that are neither read nor platform)."""
    plain = {n for n in defined if "__" not in n and n not in code.connections}
    connections = set()
    unknown = set()
    for name in defined:
        prefix, _, suffix = name.partition("__")
        if prefix in code.connections:
            connections.add(prefix)
            if suffix and suffix not in code.connection_suffixes | PLATFORM_CONNECTION_SUFFIXES:
                unknown.add(name)
        elif name not in code.names and name not in PLATFORM_SETTINGS:
            unknown.add(name)
    return plain, connections, unknown


def test_infra_defines_every_setting_the_code_reads(code: CodeSettings) -> None:
    plain, connections, _ = _split(infra_settings(), code)
    assert code.names - LOCAL_ONLY_SETTINGS - plain == set()
    assert code.connections - connections == set()


def test_infra_defines_nothing_the_code_does_not_read(code: CodeSettings) -> None:
    _, _, unknown = _split(infra_settings(), code)
    assert unknown == set()


def test_infra_connections_are_identity_based(code: CodeSettings) -> None:
    defined = infra_settings()
    for connection in code.connections:
        assert connection not in defined, f"{connection} would hold a key; use {connection}__*"
        assert f"{connection}__credential" in defined
        assert f"{connection}__clientId" in defined


def test_local_settings_example_defines_every_setting_the_code_reads(code: CodeSettings) -> None:
    plain, connections, _ = _split(local_example_settings(), code)
    assert code.names - plain == set()
    assert code.connections - connections == set()


def test_local_settings_example_defines_nothing_the_code_does_not_read(
    code: CodeSettings,
) -> None:
    _, _, unknown = _split(local_example_settings(), code)
    assert unknown == set()


def test_docs_mention_every_setting_the_code_reads(code: CodeSettings) -> None:
    text = docs_text()
    missing = {n for n in code.names | code.connections if not re.search(rf"\b{n}\b", text)}
    assert missing == set()


@pytest.mark.parametrize(
    ("script", "pattern"),
    [("postprovision.sh", r'^\s*"(\w+)": '), ("postprovision.ps1", r"^\s+(\w+)\s+= ")],
)
def test_postprovision_writes_the_settings_the_code_reads(
    code: CodeSettings, script: str, pattern: str
) -> None:
    text = (INFRA / "scripts" / script).read_text()
    written = set(re.findall(pattern, text, re.MULTILINE)) - {"IsEncrypted", "Values"}
    plain, connections, unknown = _split(written, code)
    assert unknown == set()
    assert code.names - LOCAL_ONLY_SETTINGS - plain == set()
    assert code.connections - connections == set()
