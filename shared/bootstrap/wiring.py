"""How a declared pipeline is wired: its tasks module's builders, each handed, by parameter
name, the container's parts it asks for.

A pipeline's tasks module (``shared/service_layer/<name>_tasks.py`` for the app's own) has
``build_tasks`` (task name -> task) and, when the pipeline needs them, ``build_observer`` and
``build_batch_tasks`` (every task's batch form, for a pipeline declared with ``batch``). A
builder's parameters name what it needs: a part of the container (``catalog``, ``email``,
``settings``, ...), or one of the pipeline's own Table adapters (``adapters``: parameter name
-> the adapter class, a ``TableAdapter`` built from the client of its ``TABLE``, one of the
tables the pipeline declares). Each is built on first use, once per container."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ..domain.pipelines import Pipeline, Pipelines

if TYPE_CHECKING:
    from azure.data.tables import TableClient

    from ..service_layer.session_messages import BatchTask, Observer, Task

Builder = Callable[..., Any]


class TableAdapter(Protocol):
    """A pipeline's own adapter over one table of its own: ``TABLE`` names it."""

    TABLE: ClassVar[str]

    def __init__(self, table: TableClient) -> None: ...


class Parts(Protocol):
    """What the wiring asks the container for."""

    def has_part(self, name: str) -> bool: ...

    def get_part(self, name: str) -> Any: ...

    def part(self, name: str, build: Callable[[], Any]) -> Any: ...

    def table(self, name: str) -> TableClient: ...


@dataclass(frozen=True)
class Wired:
    """A declared pipeline and the builders of its tasks (``shared.bootstrap.pipeline_list``
    lists the app's)."""

    pipeline: Pipeline
    build_tasks: Builder
    build_observer: Builder | None = None
    build_batch_tasks: Builder | None = None
    adapters: Mapping[str, type[TableAdapter]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        name = self.pipeline.name
        if self.pipeline.batch != (self.build_batch_tasks is not None):
            raise ValueError(
                f"pipeline {name!r}: its tasks module has build_batch_tasks exactly when the "
                "pipeline is declared with batch=True"
            )
        for parameter, adapter in self.adapters.items():
            if adapter.TABLE not in self.pipeline.tables:
                raise ValueError(
                    f"pipeline {name!r}: the adapter {adapter.__name__} ({parameter}) keeps the "
                    f"table {adapter.TABLE!r}, which the pipeline does not declare in tables"
                )

    @classmethod
    def of(
        cls,
        pipeline: Pipeline,
        tasks: ModuleType,
        adapters: Mapping[str, type[TableAdapter]] | None = None,
    ) -> Wired:
        """``pipeline`` wired to the builders of its tasks module ``tasks``."""
        return cls(
            pipeline,
            tasks.build_tasks,
            getattr(tasks, "build_observer", None),
            getattr(tasks, "build_batch_tasks", None),
            dict(adapters or {}),
        )

    def tasks(self, parts: Parts) -> Mapping[str, Task]:
        return self._built(self.build_tasks, parts)

    def observer(self, parts: Parts) -> Observer | None:
        return self._built(self.build_observer, parts) if self.build_observer else None

    def batch_tasks(self, parts: Parts) -> Mapping[str, BatchTask] | None:
        if self.build_batch_tasks is None:
            return None
        return self._built(self.build_batch_tasks, parts)

    def _built(self, builder: Builder, parts: Parts) -> Any:
        arguments: dict[str, Any] = {}
        for parameter in inspect.signature(builder).parameters:
            adapter = self.adapters.get(parameter)
            if adapter is not None:
                arguments[parameter] = parts.part(
                    f"{self.pipeline.name} {parameter}", _table_adapter(adapter, parts)
                )
            elif parts.has_part(parameter):
                arguments[parameter] = parts.get_part(parameter)
            else:
                raise TypeError(
                    f"pipeline {self.pipeline.name!r}: {builder.__name__} asks for "
                    f"{parameter!r}, which is neither a part of the container nor one of the "
                    "pipeline's own adapters (docs/pipelines.md, 'A port of your own')"
                )
        return builder(**arguments)


def _table_adapter(adapter: type[TableAdapter], parts: Parts) -> Callable[[], TableAdapter]:
    return lambda: adapter(parts.table(adapter.TABLE))


@dataclass(frozen=True)
class AppPipelines:
    """The pipelines an app runs, wired, in the order listed."""

    wired: tuple[Wired, ...]

    def __post_init__(self) -> None:
        Pipelines(w.pipeline for w in self.wired)  # a name, a queue setting and a route once

    @cached_property
    def declared(self) -> Pipelines:
        return Pipelines(w.pipeline for w in self.wired)

    def __getitem__(self, name: str) -> Wired:
        for wired in self.wired:
            if wired.pipeline.name == name:
                return wired
        raise KeyError(name)
