"""What a pipeline is, as data: its declaration (``Pipeline``), the failure policies, and how
a job becomes the ordered messages of one session.

A declaration says what the pipeline is (its name, its tasks in order, its failure policy,
the app setting naming its queue, its route, its retry window, the tables it owns, what its
job status shows); nothing in it is built or reached at import. The app's pipelines are
declared in the modules of this package (the purchase's and the import's here, yours beside
them) and listed in one place, ``shared.bootstrap.app_pipelines``, which wires each to its
tasks. docs/pipelines.md is the guide."""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..envelope import TaskMessage
from ..orders import Order
from ..retries import RetryPolicy

PURCHASE = "purchase"
PRODUCT_IMPORT = "product_import"

GENERATE_ORDER_NUMBER = "GenerateOrderNumber"
CALCULATE_TOTAL = "CalculateTotal"
PROCESS_PAYMENT = "ProcessPayment"
GENERATE_RECEIPT = "GenerateReceipt"
SEND_RECEIPT_EMAIL = "SendReceiptEmail"
PURCHASE_TASKS = (
    GENERATE_ORDER_NUMBER,
    CALCULATE_TOTAL,
    PROCESS_PAYMENT,
    GENERATE_RECEIPT,
    SEND_RECEIPT_EMAIL,
)

IMPORT_PRODUCT = "ImportProduct"

PayloadCheck = Callable[[Mapping[str, Any]], object]
# A queue setting's shape: the files outside Python (localdev/derived.py) find a pipeline's
# queue lines by it; REPLAY_QUEUE_NAME is the bulk replays' Storage queue, no pipeline's.
QUEUE_SETTING = re.compile(r"(?!REPLAY_)[A-Z][A-Z0-9_]*_QUEUE_NAME")
# A Table Storage table name: letters and digits, starting with a letter, 3 to 63 characters.
TABLE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]{2,62}")


class FailurePolicy(enum.Enum):
    """What a failed task means for the rest of its session."""

    STOP_ON_FAILURE = "stop-on-failure"  # nothing after a failed task may run
    CONTINUE_ON_FAILURE = "continue-on-failure"  # the failed message is set aside, the rest run


@dataclass(frozen=True)
class Pipeline:
    """One pipeline, declared: plain data.

    ``check_payload`` raises ``InvalidInput`` naming the field for a payload the tasks would
    refuse (used by the start of a job and by edit-and-replay); a job's tasks carry the mapping
    it returns (the payload's canonical form), or the payload as given when it returns none.
    ``route``: jobs are followed at ``GET /api/<route>/{job_id}`` (and replays point there);
    unless ``own_routes``, the generic start route ``POST /api/<route>`` serves it too.
    ``tables``: the Table Storage tables its own adapters keep (created with the app's,
    ``APP_TABLES``, and in infra). ``shows``: the keys of the session's context (what its
    tasks returned) that the job's status shows once the job has ended.

    ``retry``: transient failures of a task (Storage, Service Bus or a provider out of reach)
    are waited out for ``retry.window`` seconds from the first, holding the session, with a
    backoff capped at ``retry.max_backoff``; then the session fails, saying what was out of
    reach and since when.

    ``batch``: the trigger takes a session's messages in batches (``cardinality="many"``, up
    to host.json's ``maxMessageBatchSize``), each message still run, settled and told one by
    one; the pipeline's tasks module then builds each task's batch form too. Without it, one
    message per invocation. ``batch_triggers``: how many batch triggers the pipeline registers
    on its queue (``<name>_tasks``, ``<name>_tasks_2``, ...): the extension runs each batch
    trigger's receive loop one session at a time, so an instance holds up to this many of the
    pipeline's sessions at once. ``listed``: where the pipeline is listed among the others
    (lower first, then by name).
    """

    name: str
    tasks: tuple[str, ...]
    policy: FailurePolicy
    queue_setting: str
    default_queue: str
    check_payload: PayloadCheck
    route: str | None = None
    own_routes: bool = False  # an entrypoint module of its own serves ``route``
    # How long a task that fails transiently is tried again before its session fails, and
    # the backoff between tries (TASK_RETRY_* settings override it; docs/processor.md).
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    tables: tuple[str, ...] = ()
    shows: tuple[str, ...] = ()
    batch: bool = False
    batch_triggers: int = 1
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
        if self.batch_triggers < 1 or (not self.batch and self.batch_triggers != 1):
            raise ValueError(
                f"pipeline {self.name!r}: batch_triggers {self.batch_triggers} must be at least "
                "1, and 1 without batch (a one-message trigger takes maxConcurrentSessions)"
            )
        if self.route is not None and not re.fullmatch(r"[a-z][a-z0-9-]*", self.route):
            raise ValueError(
                f"pipeline {self.name!r}: route {self.route!r}: lower-case letters, digits, -"
            )
        for table in self.tables:
            if not TABLE_NAME.fullmatch(table):
                raise ValueError(
                    f"pipeline {self.name!r}: table {table!r} must be 3 to 63 letters and "
                    "digits, starting with a letter (a Table Storage table name)"
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
    """Declared pipelines, by name, in the order given (a name and a queue setting once)."""

    def __init__(self, declared: Iterable[Pipeline]) -> None:
        self._by_name: dict[str, Pipeline] = {}
        for pipeline in declared:
            other = self._by_name.get(pipeline.name)
            if other is not None and other is not pipeline:
                raise ValueError(f"Two pipelines are declared with the name {pipeline.name!r}")
            self._by_name[pipeline.name] = pipeline
        settings = [p.queue_setting for p in self._by_name.values()]
        if len(set(settings)) != len(settings):
            raise ValueError(f"Two pipelines name their queue with the same setting: {settings}")
        routes = [p.route for p in self._by_name.values() if p.route is not None]
        if len(set(routes)) != len(routes):
            raise ValueError(f"Two pipelines are declared at the same route: {routes}")

    def __iter__(self) -> Iterator[Pipeline]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

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

    @property
    def tables(self) -> tuple[str, ...]:
        """The tables the pipelines own, each once, in the pipelines' order."""
        return tuple(dict.fromkeys(t for p in self for t in p.tables))


def job_messages(
    job_id: str, pipeline: str, tasks: Sequence[str], payload: Mapping[str, Any]
) -> list[TaskMessage]:
    """Every task of one job, in the order they must run, each carrying ``payload``."""
    return [
        TaskMessage(
            job_id=job_id,
            pipeline=pipeline,
            task=task,
            step=step,
            is_last=step == len(tasks),
            payload=dict(payload),
        )
        for step, task in enumerate(tasks, start=1)
    ]


def purchase_messages(job_id: str, order: Order) -> list[TaskMessage]:
    """The five tasks of one purchase, in the order they must run."""
    return job_messages(job_id, PURCHASE, PURCHASE_TASKS, order.to_payload())


def import_message(job_id: str, step: int, *, is_last: bool, row: Mapping[str, Any]) -> TaskMessage:
    return TaskMessage(job_id, PRODUCT_IMPORT, IMPORT_PRODUCT, step, is_last, dict(row))
