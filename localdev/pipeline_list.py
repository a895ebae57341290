"""The app's pipelines as the files under ``shared/`` declare them, and the list that wires
them (``shared/bootstrap/pipeline_list.py``, written by ``python -m localdev.derived``).

Each module of ``shared/domain/pipelines/`` (``__init__`` aside) declares one ``PIPELINE``; its
tasks are ``shared/service_layer/<module>_tasks.py`` (``build_tasks`` and, when it needs them,
``build_observer``, ``build_batch_tasks``); a builder parameter that names no part of the
container names one of the pipeline's own Table adapters, ``shared/adapters/table_<parameter>.py``
(a class with ``TABLE``). A file missing is named, with what it must hold."""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.domain.pipelines import Pipeline

BUILDERS = ("build_tasks", "build_observer", "build_batch_tasks")


class DeclarationError(Exception):
    """A declared pipeline whose files are missing or wrong: the message says what to fix."""


@dataclass(frozen=True)
class Declared:
    """One pipeline the app ships: its declaration's module, its tasks module, its own
    adapters (builder parameter -> (adapter module, class))."""

    module: str
    pipeline: Pipeline
    tasks_module: str
    adapters: dict[str, tuple[str, str]]


def shipped_modules(root: Path) -> list[Declared]:
    """The pipelines declared under ``root``'s ``shared/domain/pipelines/``, as listed: by
    ``listed``, then name."""
    found = []
    for path in sorted((root / "shared" / "domain" / "pipelines").glob("*.py")):
        if path.stem != "__init__":
            found.append(_declared(root, path.stem))
    return sorted(found, key=lambda d: (d.pipeline.listed, d.pipeline.name))


def _declared(root: Path, module: str) -> Declared:
    declaration = importlib.import_module(f"shared.domain.pipelines.{module}")
    pipeline = getattr(declaration, "PIPELINE", None)
    if not isinstance(pipeline, Pipeline):
        raise DeclarationError(
            f"shared/domain/pipelines/{module}.py declares no PIPELINE (a Pipeline)"
        )
    tasks_path = root / "shared" / "service_layer" / f"{module}_tasks.py"
    if not tasks_path.exists():
        raise DeclarationError(
            f"The pipeline {pipeline.name!r} (shared/domain/pipelines/{module}.py) has no tasks: "
            f"write shared/service_layer/{module}_tasks.py with build_tasks (docs/pipelines.md)"
        )
    tasks = importlib.import_module(f"shared.service_layer.{module}_tasks")
    if not callable(getattr(tasks, "build_tasks", None)):
        raise DeclarationError(f"shared/service_layer/{module}_tasks.py has no build_tasks")
    parts = _container_parts()
    adapters: dict[str, tuple[str, str]] = {}
    for builder in BUILDERS:
        function = getattr(tasks, builder, None)
        if function is None:
            continue
        for parameter in inspect.signature(function).parameters:
            if parameter not in parts and parameter not in adapters:
                adapters[parameter] = _adapter(root, pipeline, module, builder, parameter)
    return Declared(module, pipeline, f"{module}_tasks", adapters)


def _container_parts() -> set[str]:
    from shared.bootstrap.root import Container, Part

    return {n for n, v in vars(Container).items() if isinstance(v, Part) and n[0] != "_"}


def _adapter(
    root: Path, pipeline: Pipeline, module: str, builder: str, parameter: str
) -> tuple[str, str]:
    name = f"table_{parameter}"
    if not (root / "shared" / "adapters" / f"{name}.py").exists():
        raise DeclarationError(
            f"{builder} of shared/service_layer/{module}_tasks.py asks for {parameter!r}, which "
            f"is no part of the container: write its Table adapter, shared/adapters/{name}.py "
            "(docs/pipelines.md, 'A port of your own'), or name a part"
        )
    adapter = importlib.import_module(f"shared.adapters.{name}")
    classes: list[Any] = [
        value
        for value in vars(adapter).values()
        if inspect.isclass(value)
        and value.__module__ == adapter.__name__
        and "TABLE" in vars(value)
    ]
    if len(classes) != 1:
        raise DeclarationError(
            f"shared/adapters/{name}.py must define one class with TABLE (the table it keeps), "
            f"found {len(classes)}"
        )
    if classes[0].TABLE not in pipeline.tables:
        raise DeclarationError(
            f"{classes[0].__name__} keeps the table {classes[0].TABLE!r}: declare it in the "
            f"tables of {pipeline.name!r} (shared/domain/pipelines/{module}.py)"
        )
    return name, classes[0].__name__


HEADER = '''"""The pipelines this app runs, each declaration wired to its tasks: the one list.

Written by ``python -m localdev.derived`` from the declarations in shared/domain/pipelines/
(each wired to its tasks module, shared/service_layer/<name>_tasks.py, and to the Table
adapters its builders ask for, shared/adapters/table_<parameter>.py); ``--check`` names this
file when it is stale. docs/pipelines.md is the guide."""

from __future__ import annotations

'''


def pipeline_list_source(declared: list[Declared]) -> str:
    """The text of ``shared/bootstrap/pipeline_list.py`` for ``declared``."""
    adapters = sorted({a for d in declared for a in d.adapters.values()})
    lines = [f"from ..adapters.{module} import {cls}" for module, cls in adapters]
    lines.append(_import("..domain.pipelines", sorted(d.module for d in declared)))
    lines.append(_import("..service_layer", sorted(d.tasks_module for d in declared)))
    lines += ["from .wiring import Wired", "", "WIRED = ("]
    for d in declared:
        if d.adapters:
            mapping = ", ".join(f'"{p}": {cls}' for p, (_, cls) in d.adapters.items())
            lines += [
                "    Wired.of(",
                f"        {d.module}.PIPELINE,",
                f"        {d.tasks_module},",
                f"        adapters={{{mapping}}},",
                "    ),",
            ]
        else:
            lines.append(f"    Wired.of({d.module}.PIPELINE, {d.tasks_module}),")
    lines.append(")")
    return HEADER + "\n".join(lines) + "\n"


def _import(package: str, names: list[str]) -> str:
    one_line = f"from {package} import {', '.join(names)}"
    if len(one_line) <= 100:
        return one_line
    return f"from {package} import (\n" + "".join(f"    {n},\n" for n in names) + ")"
