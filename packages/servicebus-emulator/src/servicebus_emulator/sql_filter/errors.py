"""The two ways a rule can fail: rejected when it is compiled, or failing on one message."""

from __future__ import annotations


class SqlFilterError(ValueError):
    """A filter or action expression that is not valid, found when it is compiled.

    Service Bus refuses such a rule when it is created, so nothing has been evaluated yet.
    `reason` says what is wrong, `position` is the 0-based offset into `expression` it points at
    (None when it is about the whole expression), `line` and `column` are 1-based.
    """

    def __init__(self, reason: str, *, expression: str, position: int | None = None) -> None:
        self.reason = reason
        self.expression = expression
        self.position = position
        self.line: int | None = None
        self.column: int | None = None
        message = reason
        if position is not None:
            self.line = expression.count("\n", 0, position) + 1
            self.column = position - (expression.rfind("\n", 0, position) + 1) + 1
            where = f"column {self.column}"
            if "\n" in expression:
                where = f"line {self.line}, {where}"
            message = f"{reason} (at {where})"
        super().__init__(message)


class SqlEvaluationError(Exception):
    """A compiled rule that failed on one message (integer division by zero, a LIKE pattern or
    escape taken from the message that is not valid, a value an action cannot store).

    Service Bus calls this a filter evaluation exception: a subscription with
    DeadLetteringOnFilterEvaluationExceptions (on by default) dead-letters the message there.
    """
