"""The pipelines this app runs, each declared once, and the registry that holds them.

A declaration (``Pipeline``) is one object in a module of this package, named ``PIPELINE``:
its name, its tasks in order, its failure policy, the app setting that names its queue (and
the queue's default name), the check its payloads must pass, how its tasks are built from the
composition root and, optionally, the HTTP route its jobs are started at and followed at.
Everything generic (the settings, the session triggers, the archive's queues, edit checks,
replay history, the overview, the local stack, the infrastructure's queue list) reads the
registry instead of naming pipelines.

``registry()`` imports every module of this package, then each module the app setting
``PIPELINE_MODULES`` names (comma-separated; for pipelines kept outside the app, such as the
tests' example), and keeps the declarations they define. docs/pipelines.md is the guide.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

from ...domain.envelope import TaskMessage
from ...domain.pipelines import FailurePolicy, job_messages
from ...domain.retries import RetryPolicy

if TYPE_CHECKING:
    from ...bootstrap import Container
    from ..session_messages import BatchTask, Observer, Task

PIPELINE_MODULES_SETTING = "PIPELINE_MODULES"

PayloadCheck = Callable[[Mapping[str, Any]], object]
# A queue setting's shape: the files outside Python (localdev/pipelines.py) find a pipeline's
# queue lines by it; REPLAY_QUEUE_NAME is the bulk replays' Storage queue, no pipeline's.
QUEUE_SETTING = re.compile(r"(?!REPLAY_)[A-Z][A-Z0-9_]*_QUEUE_NAME")


@dataclass(frozen=True)
class Pipeline:
    """One pipeline, declared.

    ``check_payload`` raises ``InvalidInput`` naming the field for a payload the tasks would
    refuse (used by the start of a job and by edit-and-replay); a job's tasks carry the mapping
    it returns (the payload's canonical form), or the payload as given when it returns none.
    ``build_tasks`` returns the task callables by task name, built from the container's parts;
    ``observer`` optionally records pipeline-specific progress (an order's steps, an import's
    rows) besides the generic session outcomes. ``route``: jobs are followed at
    ``GET /api/<route>/{job_id}`` (and replays point there); unless ``own_routes``, the
    generic start route ``POST /api/<route>`` serves it too.

    ``retry``: transient failures of a task (Storage, Service Bus or a provider out of reach)
    are waited out for ``retry.window`` seconds from the first, holding the session, with a
    backoff capped at ``retry.max_backoff``; then the session fails, saying what was out of
    reach and since when.

    ``batch``: the trigger takes a session's messages in batches (``cardinality="many"``, up
    to host.json's ``maxMessageBatchSize``), each message still run, settled and told one by
    one; the tasks it returns (``BatchTask``, by task name) write the consecutive good messages
    of a batch together. Without it, one message per invocation. ``batch_triggers``: how many
    batch triggers the pipeline registers on its queue (``<name>_tasks``, ``<name>_tasks_2``,
    ...): the extension runs each batch trigger's receive loop one session at a time, so an
    instance holds up to this many of the pipeline's sessions at once.
    """

    name: str
    tasks: tuple[str, ...]
    policy: FailurePolicy
    queue_setting: str
    default_queue: str
    check_payload: PayloadCheck
    build_tasks: Callable[[Container], Mapping[str, Task]]
    observer: Callable[[Container], Observer] | None = None
    batch: Callable[[Container], Mapping[str, BatchTask]] | None = None
    batch_triggers: int = 1
    route: str | None = None
    own_routes: bool = False  # an entrypoint module of its own serves ``route``
    # How long a task that fails transiently is tried again before its session fails, and
    # the backoff between tries (TASK_RETRY_* settings override it; docs/processor.md).
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    # Where the pipeline is listed among the others (the archive's runs, the overview's
    # queues): lower first, then by name.
    listed: int = 100

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", self.name):
            raise ValueError(f"pipeline name {self.name!r}: lower-case letters, digits and _")
        if not QUEUE_SETTING.fullmatch(self.queue_setting):
            raise ValueError(
                f"pipeline {self.name!r}: queue_setting {self.queue_setting!r} must be an "
                "upper-case app setting name ending in _QUEUE_NAME (not REPLAY_QUEUE_NAME)"
            )
        if not self.tasks:
            raise ValueError(f"pipeline {self.name!r} declares no task")
        if self.batch_triggers < 1 or (self.batch is None and self.batch_triggers != 1):
            raise ValueError(
                f"pipeline {self.name!r}: batch_triggers {self.batch_triggers} must be at least "
                "1, and 1 without batch (a one-message trigger takes maxConcurrentSessions)"
            )

    @property
    def function_name(self) -> str:
        """The session trigger's function name (the first one's, with ``batch_triggers``)."""
        return f"{self.name}_tasks"

    @property
    def function_names(self) -> tuple[str, ...]:
        """The session triggers' function names, one per batch trigger."""
        more = (f"{self.function_name}_{n}" for n in range(2, self.batch_triggers + 1))
        return (self.function_name, *more)

    @property
    def stops_on_failure(self) -> bool:
        return self.policy is FailurePolicy.STOP_ON_FAILURE

    def messages(self, job_id: str, payload: Mapping[str, Any]) -> list[TaskMessage]:
        """Every task of one job, in the order they must run, each carrying ``payload``."""
        return job_messages(job_id, self.name, self.tasks, payload)


class UnknownPipeline(LookupError):
    pass


class Pipelines:
    """The declared pipelines, by name, in declaration order."""

    def __init__(self, declared: tuple[Pipeline, ...]) -> None:
        self._by_name: dict[str, Pipeline] = {}
        for pipeline in declared:
            other = self._by_name.get(pipeline.name)
            if other is not None and other is not pipeline:
                raise ValueError(f"Two pipelines are declared with the name {pipeline.name!r}")
            self._by_name[pipeline.name] = pipeline
        settings = [p.queue_setting for p in self._by_name.values()]
        if len(set(settings)) != len(settings):
            raise ValueError(f"Two pipelines name their queue with the same setting: {settings}")

    def __iter__(self) -> Iterator[Pipeline]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def get(self, name: str | None) -> Pipeline:
        """Raises ``UnknownPipeline``."""
        try:
            return self._by_name[name or ""]
        except KeyError:
            raise UnknownPipeline(name) from None

    def find(self, name: str | None) -> Pipeline | None:
        return self._by_name.get(name or "")

    def policy(self, name: str | None) -> FailurePolicy:
        """The pipeline's failure policy; an unknown pipeline stops: the careful choice."""
        pipeline = self.find(name)
        return pipeline.policy if pipeline else FailurePolicy.STOP_ON_FAILURE

    def payload_check(self, name: str | None) -> PayloadCheck | None:
        pipeline = self.find(name)
        return pipeline.check_payload if pipeline else None


def registry(environ: Mapping[str, str] | None = None) -> Pipelines:
    """The pipelines of this package and of the modules ``PIPELINE_MODULES`` names."""
    environ = os.environ if environ is None else environ
    return _load(environ.get(PIPELINE_MODULES_SETTING, "").strip())


@cache
def _load(extra_modules: str) -> Pipelines:
    names = [f"{__name__}.{m.name}" for m in pkgutil.iter_modules(__path__)]
    names += [name.strip() for name in extra_modules.split(",") if name.strip()]
    declared = []
    for name in names:
        pipeline = getattr(importlib.import_module(name), "PIPELINE", None)
        if not isinstance(pipeline, Pipeline):
            raise ValueError(
                f"{name} declares no PIPELINE (a shared.service_layer.pipelines.Pipeline)"
            )
        declared.append(pipeline)
    return Pipelines(tuple(sorted(declared, key=lambda p: (p.listed, p.name))))
