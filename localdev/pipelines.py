"""Write the declared pipelines' queues into the files outside Python that list them.

    .venv/bin/python -m localdev.pipelines          # rewrite what is stale, name each file
    .venv/bin/python -m localdev.pipelines --check  # exit 1 naming the stale files, write nothing

The registry (``shared.service_layer.pipelines``, without ``PIPELINE_MODULES``: the pipelines
the app ships) is the one source. ``infra/pipelines.json`` is written whole and read by Bicep
(``loadJsonContent``: the Service Bus queues and the app settings); the other files keep
everything but their pipeline queue lines, which are rewritten in the registry's order:
the emulator's ``infra/local/config.json``, ``local.settings.json.example``, the postprovision
scripts, the settings tables of README.md and docs/deploy.md.
``tests/infra/test_pipeline_queues.py`` fails naming the file and the pipeline when one of
them disagrees with the registry.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.service_layer.pipelines import QUEUE_SETTING, Pipeline, registry

REPO_ROOT = Path(__file__).resolve().parent.parent
# A pipeline's queue setting, as the files write it (every declaration's has this shape).
_QUEUE_SETTING = QUEUE_SETTING.pattern

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


def shipped() -> list[Pipeline]:
    """The pipelines the app ships: the registry without ``PIPELINE_MODULES``."""
    return list(registry({}))


def pipelines_json(_: str, pipelines: Sequence[Pipeline]) -> str:
    document = {
        "//": "Written by `python -m localdev.pipelines` from shared/service_layer/pipelines.",
        "pipelines": [
            {"name": p.name, "queueSetting": p.queue_setting, "queue": p.default_queue}
            for p in pipelines
        ],
    }
    return json.dumps(document, indent=2) + "\n"


def emulator_config(text: str, pipelines: Sequence[Pipeline]) -> str:
    document = json.loads(text)
    (namespace,) = document["UserConfig"]["Namespaces"]
    namespace["Queues"] = emulator_queues(p.default_queue for p in pipelines)
    return json.dumps(document, indent=2) + "\n"


def emulator_queues(names: Any) -> list[dict[str, Any]]:
    """The emulator's queue entries of ``names``, each a session queue as infra makes it."""
    return [{"Name": name, "Properties": dict(SESSION_QUEUE_PROPERTIES)} for name in names]


def local_settings(text: str, pipelines: Sequence[Pipeline]) -> str:
    document = json.loads(text)
    values: dict[str, str] = {}
    placed = False
    for name, value in document["Values"].items():
        if re.fullmatch(_QUEUE_SETTING, name) or (name == "REPLAY_QUEUE_NAME" and not placed):
            if not placed:
                values.update({p.queue_setting: p.default_queue for p in pipelines})
                placed = True
            if name != "REPLAY_QUEUE_NAME":
                continue
        values[name] = value
    document["Values"] = values
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


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


def postprovision_sh(text: str, pipelines: Sequence[Pipeline]) -> str:
    lines = [f'    "{p.queue_setting}": "{p.default_queue}",\n' for p in pipelines]
    return _replace_lines(
        text, rf'\s*"{_QUEUE_SETTING}": ', lines, before=r'\s*"REPLAY_QUEUE_NAME": '
    )


def postprovision_ps1(text: str, pipelines: Sequence[Pipeline]) -> str:
    width = len("ServiceBusConnection__fullyQualifiedNamespace")
    lines = [f"        {p.queue_setting:<{width}} = '{p.default_queue}'\n" for p in pipelines]
    return _replace_lines(
        text, rf"\s+{_QUEUE_SETTING}\s+= ", lines, before=r"\s+REPLAY_QUEUE_NAME\s+= "
    )


def readme(text: str, pipelines: Sequence[Pipeline]) -> str:
    names = ", ".join(f"`{p.queue_setting}`" for p in pipelines)
    uses = ", ".join(f"`%{p.queue_setting}%`" for p in pipelines)
    row = (
        f"| {names} | the session-enabled Service Bus queues, one per pipeline "
        f"(docs/pipelines.md; triggers use {uses}) |\n"
    )
    return _replace_lines(text, rf"\| `{_QUEUE_SETTING}`", [row])


def deploy_doc(text: str, pipelines: Sequence[Pipeline]) -> str:
    rows = [
        f"| `{p.queue_setting}` | `{p.default_queue}` | same | {p.name} pipeline queue |\n"
        for p in pipelines
    ]
    return _replace_lines(
        text, rf"\| `{_QUEUE_SETTING}` \|", rows, before=r"\| `REPLAY_QUEUE_NAME` \|"
    )


@dataclass(frozen=True)
class Derived:
    path: str  # from the repository's root
    write: Callable[[str, Sequence[Pipeline]], str]  # its text, with the registry's queues


DERIVED = (
    Derived("infra/pipelines.json", pipelines_json),
    Derived("infra/local/config.json", emulator_config),
    Derived("local.settings.json.example", local_settings),
    Derived("infra/scripts/postprovision.sh", postprovision_sh),
    Derived("infra/scripts/postprovision.ps1", postprovision_ps1),
    Derived("README.md", readme),
    Derived("docs/deploy.md", deploy_doc),
)


def stale(root: Path = REPO_ROOT) -> dict[str, str]:
    """Each derived file whose queues disagree with the registry: path -> what it should be."""
    pipelines = shipped()
    found = {}
    for derived in DERIVED:
        path = root / derived.path
        text = path.read_text() if path.exists() else ""
        wanted = derived.write(text, pipelines)
        if wanted != text:
            found[derived.path] = wanted
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localdev.pipelines", description=__doc__)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    found = stale()
    for path, text in found.items():
        if args.check:
            print(f"{path} is stale: run python -m localdev.pipelines")
        else:
            (REPO_ROOT / path).write_text(text)
            print(f"wrote {path}")
    if not found:
        print("every file lists the declared pipelines' queues")
    return 1 if found and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
