"""One root error class, and the two kinds of task failure the processor tells apart."""

from __future__ import annotations


class PipelineError(Exception):
    """Root of every error this app raises on purpose."""


class MalformedMessage(PipelineError):
    """A task message that cannot be understood. ``field`` names what is wrong."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class InvalidInput(PipelineError):
    """Input from a caller (an order, a product row) that breaks a rule. ``field`` names it."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class TaskFailed(PipelineError):
    """A task could not do its work. ``reason`` is a short machine-readable code that ends up
    as the dead-letter reason; ``description`` tells a person what happened and what to do."""

    retryable = False

    def __init__(self, reason: str, description: str) -> None:
        super().__init__(f"{reason}: {description}")
        self.reason = reason
        self.description = description


class PermanentTaskError(TaskFailed):
    """Retrying cannot help (declined card, unknown SKU, invalid row)."""


class TransientTaskError(TaskFailed):
    """Retrying later may help (a provider outage, a timeout)."""

    retryable = True
