"""Subscription rules: what a rule is (a filter and an optional action, as config.json and the
administration API describe it), compiled once with the sql_filter module, and which copies
of a message sent to a topic a subscription gets.

Service Bus's topic-filters rules: the rules without an action are ORed and give one copy (the
message as sent); each rule with an action that matches gives a copy of its own, the action run
on it, with an application property ``RuleName`` naming the rule. A new subscription has the
``$Default`` rule, a TrueFilter.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .clock import now_ms
from .message import Incoming
from .rule_message import RuleView
from .sql_filter import (
    RuleMessage,
    SqlEvaluationError,
    compile_action,
    compile_correlation_filter,
    compile_filter,
)

DEFAULT_RULE = "$Default"
TRUE, FALSE, SQL, CORRELATION = "TrueFilter", "FalseFilter", "SqlFilter", "CorrelationFilter"
# CorrelationFilter fields: config.json / Atom names -> the sql_filter module's keywords.
CORRELATION_FIELDS = {
    "CorrelationId": "correlation_id",
    "MessageId": "message_id",
    "To": "to",
    "ReplyTo": "reply_to",
    "Label": "subject",
    "SessionId": "session_id",
    "ReplyToSessionId": "reply_to_session_id",
    "ContentType": "content_type",
}


@dataclass(frozen=True)
class RuleConfig:
    name: str
    filter_type: str = TRUE  # TRUE, FALSE, SQL or CORRELATION
    sql: str = ""  # SqlFilter expression
    correlation: dict[str, str] = field(default_factory=dict)  # CORRELATION_FIELDS keys
    properties: dict[str, Any] = field(default_factory=dict)  # CorrelationFilter user properties
    parameters: dict[str, Any] = field(default_factory=dict)  # SqlFilter parameters
    action: str = ""  # SqlRuleAction expression; "" for none
    action_parameters: dict[str, Any] = field(default_factory=dict)


DEFAULT = RuleConfig(DEFAULT_RULE)


@dataclass(frozen=True)
class Rule:
    config: RuleConfig
    matches: Callable[[RuleMessage], bool]
    act: Callable[[RuleMessage], None] | None
    created_at: int = field(default_factory=now_ms)

    @property
    def name(self) -> str:
        return self.config.name


def compile_rule(config: RuleConfig) -> Rule:
    """Raises sql_filter.SqlFilterError for an expression Service Bus would refuse."""
    if config.filter_type == SQL:
        matches = compile_filter(config.sql, config.parameters)
    elif config.filter_type == CORRELATION:
        fields = {CORRELATION_FIELDS[key]: value for key, value in config.correlation.items()}
        matches = compile_correlation_filter(**fields, properties=config.properties)
    elif config.filter_type == FALSE:
        matches = compile_filter("1=0")
    else:
        matches = compile_filter("1=1")
    act = compile_action(config.action, config.action_parameters) if config.action else None
    return Rule(config, matches, act)


class FilterEvaluationFailed(Exception):
    """A rule failed on one message (sql_filter.SqlEvaluationError): the subscription
    dead-letters the message when DeadLetteringOnFilterEvaluationExceptions is on."""

    def __init__(self, rule: str, failure: SqlEvaluationError) -> None:
        super().__init__(f"The rule '{rule}' failed on the message: {failure}")
        self.rule = rule


def copies(
    rules: list[Rule], incoming: Incoming, *, sequence_number: int, enqueued_at: int, size: int
) -> list[Incoming]:
    """The copies of ``incoming`` a subscription with these rules gets (none: no rule matched).
    Raises FilterEvaluationFailed when a rule fails on the message."""

    def view() -> RuleView:
        return RuleView(
            incoming, sequence_number=sequence_number, enqueued_at=enqueued_at, size=size
        )

    found: list[Incoming] = []
    plain_matched = False
    reader = view()
    for rule in rules:
        try:
            if rule.act is None:
                if not plain_matched and rule.matches(reader):
                    plain_matched = True
                continue
            copy = view()
            if rule.matches(copy):
                rule.act(copy)
                copy.application_properties["RuleName"] = rule.name
                found.append(copy.result())
        except SqlEvaluationError as failure:
            raise FilterEvaluationFailed(rule.name, failure) from failure
    if plain_matched:
        found.insert(0, incoming)
    return found
