"""The pipelines the app runs: the list (``pipeline_list``), and those of the modules the app
setting ``PIPELINE_MODULES`` names (pipelines kept outside the app, such as the tests'
examples: each such module declares ``PIPELINE``; its builders are its own, or those of the
module beside it named ``<module>_tasks``, as for the app's pipelines). The composition root
hands them to whatever needs them."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from functools import cache

from ..adapters.azure_clients import CORE_TABLES
from ..config import pipeline_modules
from ..domain.pipelines import Pipeline, Pipelines
from .pipeline_list import WIRED
from .wiring import AppPipelines, Wired

# The tables the app keeps: its own and those the listed pipelines declare (infra and the
# local stack create them; ``python -m localdev.derived`` writes them where files list them).
APP_TABLES = tuple(dict.fromkeys((*CORE_TABLES, *Pipelines(w.pipeline for w in WIRED).tables)))


def app_pipelines(environ: Mapping[str, str] | None = None) -> AppPipelines:
    """The listed pipelines and those of ``PIPELINE_MODULES``, by ``listed``, then name."""
    return _load(pipeline_modules(environ))


def app_tables(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """``APP_TABLES``, with the tables of the pipelines of ``PIPELINE_MODULES``."""
    tables = (*CORE_TABLES, *app_pipelines(environ).declared.tables)
    return tuple(dict.fromkeys(tables))


@cache
def _load(modules: tuple[str, ...]) -> AppPipelines:
    extra = []
    for name in modules:
        module = importlib.import_module(name)
        pipeline = getattr(module, "PIPELINE", None)
        if not isinstance(pipeline, Pipeline):
            raise ValueError(f"{name} declares no PIPELINE (a shared.domain.pipelines.Pipeline)")
        tasks = (
            module if hasattr(module, "build_tasks") else importlib.import_module(f"{name}_tasks")
        )
        extra.append(Wired.of(pipeline, tasks))
    wired = sorted((*WIRED, *extra), key=lambda w: (w.pipeline.listed, w.pipeline.name))
    return AppPipelines(tuple(wired))
