"""The files outside Python that list what the pipeline declarations imply, each with how
its text is written from them (``python -m localdev.derived``): the queues, the queue
settings, the tables and the worker's thread count."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.domain.pipelines import QUEUE_SETTING, Pipeline

from .pipeline_list import Declared

# A pipeline's queue setting, as the files write it (every declaration's has this shape).
_QUEUE_SETTING = QUEUE_SETTING.pattern
# Invocations that may run beside the sessions on one instance: HTTP requests (the API and
# the console), the archive timer, the bulk replay queue trigger.
OTHER_INVOCATIONS = 4

# The properties of every session queue, as infra/app/servicebus.bicep creates them.
SESSION_QUEUE_PROPERTIES: dict[str, Any] = {
    "DeadLetteringOnMessageExpiration": True,
    "DefaultMessageTimeToLive": "PT1H",
    "DuplicateDetectionHistoryTimeWindow": "PT1H",
    "ForwardDeadLetteredMessagesTo": "",
    "ForwardTo": "",
    "LockDuration": "PT1M",
    "MaxDeliveryCount": 50,
    "RequiresDuplicateDetection": True,
    "RequiresSession": True,
}


@dataclass(frozen=True)
class Facts:
    """What the declarations imply: the pipelines in the list's order, the app's tables (its
    own, then each pipeline's), and the worker's thread count."""

    pipelines: tuple[Pipeline, ...]
    tables: tuple[str, ...]
    thread_count: int

    @classmethod
    def of(cls, declared: Sequence[Declared], root: Path) -> Facts:
        from shared.adapters.azure_clients import CORE_TABLES

        pipelines = tuple(d.pipeline for d in declared)
        tables = tuple(dict.fromkeys((*CORE_TABLES, *(t for p in pipelines for t in p.tables))))
        host = json.loads((root / "host.json").read_text())
        return cls(pipelines, tables, thread_count(len(pipelines), host))


def thread_count(queues: int, host: dict[str, Any]) -> int:
    """The worker's threads for the synchronous functions: each session queue's trigger runs
    up to host.json's ``maxConcurrentSessions`` invocations at once, and ``OTHER_INVOCATIONS``
    run beside them."""
    return queues * int(host["extensions"]["serviceBus"]["maxConcurrentSessions"]) + (
        OTHER_INVOCATIONS
    )


def app_resources_json(_: str, facts: Facts) -> str:
    document = {
        "//": "Written by `python -m localdev.derived` from shared/domain/pipelines/.",
        "pipelines": [
            {"name": p.name, "queueSetting": p.queue_setting, "queue": p.default_queue}
            for p in facts.pipelines
        ],
        "tables": list(facts.tables),
        "threadCount": facts.thread_count,
    }
    return json.dumps(document, indent=2) + "\n"


def emulator_config(text: str, facts: Facts) -> str:
    document = json.loads(text)
    (namespace,) = document["UserConfig"]["Namespaces"]
    namespace["Queues"] = emulator_queues(p.default_queue for p in facts.pipelines)
    return json.dumps(document, indent=2) + "\n"


def emulator_queues(names: Iterable[str]) -> list[dict[str, Any]]:
    """The emulator's queue entries of ``names``, each a session queue as infra makes it."""
    return [{"Name": name, "Properties": dict(SESSION_QUEUE_PROPERTIES)} for name in names]


def local_settings(text: str, facts: Facts) -> str:
    document = json.loads(text)
    values: dict[str, str] = {}
    placed = False
    for name, value in document["Values"].items():
        if re.fullmatch(_QUEUE_SETTING, name) or (name == "REPLAY_QUEUE_NAME" and not placed):
            if not placed:
                values.update({p.queue_setting: p.default_queue for p in facts.pipelines})
                placed = True
            if name != "REPLAY_QUEUE_NAME":
                continue
        values[name] = str(facts.thread_count) if name == THREAD_COUNT_SETTING else value
    document["Values"] = values
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


THREAD_COUNT_SETTING = "PYTHON_THREADPOOL_THREAD_COUNT"


def _replace_lines(
    text: str, pattern: str, lines: Sequence[str], *, before: str | None = None
) -> str:
    """``text`` with the lines matching ``pattern`` replaced by ``lines``, where the first of
    them was (else right above the first line matching ``before``)."""
    out: list[str] = []
    placed = False
    for line in text.splitlines(keepends=True):
        if re.match(pattern, line):
            if not placed:
                out.extend(lines)
                placed = True
            continue
        if not placed and before is not None and re.match(before, line):
            out.extend(lines)
            placed = True
        out.append(line)
    return "".join(out)


def postprovision_sh(text: str, facts: Facts) -> str:
    lines = [f'    "{p.queue_setting}": "{p.default_queue}",\n' for p in facts.pipelines]
    return _replace_lines(
        text, rf'\s*"{_QUEUE_SETTING}": ', lines, before=r'\s*"REPLAY_QUEUE_NAME": '
    )


def postprovision_ps1(text: str, facts: Facts) -> str:
    width = len("ServiceBusConnection__fullyQualifiedNamespace")
    lines = [f"        {p.queue_setting:<{width}} = '{p.default_queue}'\n" for p in facts.pipelines]
    return _replace_lines(
        text, rf"\s+{_QUEUE_SETTING}\s+= ", lines, before=r"\s+REPLAY_QUEUE_NAME\s+= "
    )


# The list of tables in README's and docs/deploy.md's Storage rows.
_TABLES = re.compile(r"tables (`[a-z][a-z0-9]*`, )*`[a-z][a-z0-9]*`;")


def _tables(text: str, facts: Facts) -> str:
    listed = ", ".join(f"`{table}`" for table in facts.tables)
    return _TABLES.sub(f"tables {listed};", text)


def readme(text: str, facts: Facts) -> str:
    names = ", ".join(f"`{p.queue_setting}`" for p in facts.pipelines)
    uses = ", ".join(f"`%{p.queue_setting}%`" for p in facts.pipelines)
    row = (
        f"| {names} | the session-enabled Service Bus queues, one per pipeline "
        f"(docs/pipelines.md; triggers use {uses}) |\n"
    )
    return _tables(_replace_lines(text, rf"\| `{_QUEUE_SETTING}`", [row]), facts)


_THREADS = re.compile(
    r"(\| `PYTHON_THREADPOOL_THREAD_COUNT` \(app settings, example\) \| )`\d+`"
    r"( \| the worker runs the synchronous functions on this pool: )\d+( session queues)"
)


def deploy_doc(text: str, facts: Facts) -> str:
    rows = [
        f"| `{p.queue_setting}` | `{p.default_queue}` | same | {p.name} pipeline queue |\n"
        for p in facts.pipelines
    ]
    text = _replace_lines(
        text, rf"\| `{_QUEUE_SETTING}` \|", rows, before=r"\| `REPLAY_QUEUE_NAME` \|"
    )
    text = _THREADS.sub(
        lambda m: f"{m[1]}`{facts.thread_count}`{m[2]}{len(facts.pipelines)}{m[3]}", text
    )
    return _tables(text, facts)


@dataclass(frozen=True)
class Derived:
    path: str  # from the repository's root
    write: Callable[[str, Facts], str]  # its text, with what the declarations imply


DERIVED = (
    Derived("infra/app-resources.json", app_resources_json),
    Derived("infra/local/config.json", emulator_config),
    Derived("local.settings.json.example", local_settings),
    Derived("infra/scripts/postprovision.sh", postprovision_sh),
    Derived("infra/scripts/postprovision.ps1", postprovision_ps1),
    Derived("README.md", readme),
    Derived("docs/deploy.md", deploy_doc),
)
