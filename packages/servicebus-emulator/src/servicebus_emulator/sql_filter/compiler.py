"""Compiles a parsed filter or action into closures over the message, once per rule.

Each node becomes one closure; a node whose operands are all constant is evaluated here instead
(so `1=1` compiles to a function that returns True without looking at the message). Everything
Service Bus would refuse when the rule is created is refused here, with its position: reserved
words as names, unknown `sys.` properties, unknown functions, IS NULL / EXISTS on something that
is not a property, read-only targets, constants that cannot work (an escape of two characters).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from lark import Token, Tree

from . import actions, values
from .errors import SqlEvaluationError, SqlFilterError
from .grammar import ACTION_KEYWORDS, FILTER_KEYWORDS, parse
from .properties import (
    READ_ONLY_SYSTEM_PROPERTIES,
    WRITABLE_SYSTEM_PROPERTIES,
    RuleMessage,
    find_key,
    system_getter,
    system_property_name,
    user_exists,
    user_getter,
)

Evaluator = Callable[[RuleMessage], Any]
_INT64_MAX = 2**63 - 1
_NOT_CONSTANT: Any = object()
_NO_MESSAGE: Any = None  # what a constant node is evaluated with: it never looks
_PARAMETER_TYPES = (str, int, float, bool, uuid.UUID, datetime, timedelta)


@dataclass(frozen=True, slots=True)
class _Compiled:
    evaluate: Evaluator
    constant: Any = _NOT_CONSTANT

    @property
    def is_constant(self) -> bool:
        return self.constant is not _NOT_CONSTANT


def _constant(value: Any) -> _Compiled:
    return _Compiled(lambda message: value, value)


@dataclass(frozen=True, slots=True)
class _Property:
    scope: str  # "sys" or "user"
    name: str  # the canonical system property name, or the user property's name

    def read(self) -> Evaluator:
        return system_getter(self.name) if self.scope == "sys" else user_getter(self.name)


class Compiler:
    """Compiles one expression; `keywords` are the words that cannot be regular identifiers."""

    def __init__(
        self, expression: str, parameters: Mapping[str, Any] | None, keywords: frozenset[str]
    ) -> None:
        self.expression = expression
        self.keywords = keywords
        self.parameters = self._check_parameters(parameters or {})

    def error(self, reason: str, at: Tree[Token] | Token | None = None) -> SqlFilterError:
        position: int | None = None
        if isinstance(at, Token):
            position = at.start_pos
        elif at is not None and not at.meta.empty:
            position = at.meta.start_pos
        return SqlFilterError(reason, expression=self.expression, position=position)

    def _fold(
        self, evaluate: Evaluator, parts: list[_Compiled], at: Tree[Token] | Token
    ) -> _Compiled:
        """A node, evaluated now when all its operands are constant."""
        if all(part.is_constant for part in parts):
            try:
                return _constant(evaluate(_NO_MESSAGE))
            except SqlEvaluationError as error:
                raise self.error(str(error), at) from None
        return _Compiled(evaluate)

    # --- predicates: evaluate to True, False or None (unknown) ---------------------------

    def predicate(self, node: Tree[Token]) -> _Compiled:
        handlers: dict[str, Callable[[Tree[Token]], _Compiled]] = {
            "or_": self._or,
            "and_": self._and,
            "not_": self._not,
            "compare": self._compare,
            "like": self._like,
            "in_": self._in,
            "is_null": self._is_null,
            "exists": self._exists,
        }
        return handlers[str(node.data)](node)

    def _or(self, node: Tree[Token]) -> _Compiled:
        return self._junction(node, decisive=True)

    def _and(self, node: Tree[Token]) -> _Compiled:
        return self._junction(node, decisive=False)

    def _junction(self, node: Tree[Token], decisive: bool) -> _Compiled:
        """OR (True decides) or AND (False decides), with unknown as SQL's tables have it."""
        left, right = self.predicate(_tree(node, 0)), self.predicate(_tree(node, 2))
        first, second = left.evaluate, right.evaluate

        def evaluate(message: RuleMessage) -> bool | None:
            a = first(message)
            if a is decisive:
                return decisive
            b = second(message)
            if b is decisive:
                return decisive
            return None if a is None or b is None else not decisive

        return self._fold(evaluate, [left, right], node)

    def _not(self, node: Tree[Token]) -> _Compiled:
        operand = self.predicate(_tree(node, 1))
        inner = operand.evaluate

        def evaluate(message: RuleMessage) -> bool | None:
            result = inner(message)
            return None if result is None else not result

        return self._fold(evaluate, [operand], node)

    def _compare(self, node: Tree[Token]) -> _Compiled:
        left, right = self.value(_tree(node, 0)), self.value(_tree(node, 2))
        compare = values.comparison(str(node.children[1]))
        first, second = left.evaluate, right.evaluate

        def evaluate(message: RuleMessage) -> bool | None:
            return compare(first(message), second(message))

        return self._fold(evaluate, [left, right], node)

    def _like(self, node: Tree[Token]) -> _Compiled:
        children = node.children
        negated = _is_token(children[1], "NOT")
        operand = self.value(_tree(node, 0))
        pattern_node = _tree(node, 3 if negated else 2)
        escape_node = _tree(node, len(children) - 1) if _is_token(children[-2], "ESCAPE") else None
        pattern = self.value(pattern_node)
        escape = self.value(escape_node) if escape_node is not None else _constant(None)
        text = operand.evaluate
        if pattern.is_constant and escape.is_constant:
            if pattern.constant is None or (escape_node is not None and escape.constant is None):
                return _constant(None)
            if not isinstance(pattern.constant, str):
                raise self.error("the LIKE pattern must be a string", pattern_node)
            if escape_node is not None and not (
                isinstance(escape.constant, str) and len(escape.constant) == 1
            ):
                raise self.error("the LIKE escape must be one character", escape_node)
            try:
                regex = values.like_pattern(pattern.constant, escape.constant)
            except ValueError as error:
                raise self.error(str(error), pattern_node) from None
            match = regex.fullmatch

            def evaluate(message: RuleMessage) -> bool | None:
                value = text(message)
                if not isinstance(value, str):
                    return None  # unknown, or not a string
                return (match(value) is not None) != negated

            return self._fold(evaluate, [operand], node)

        pattern_of, escape_of = pattern.evaluate, escape.evaluate
        has_escape = escape_node is not None

        def evaluate_dynamic(message: RuleMessage) -> bool | None:
            value, form = text(message), pattern_of(message)
            esc = escape_of(message)
            if value is None or form is None or (has_escape and esc is None):
                return None
            if not isinstance(form, str) or (has_escape and not isinstance(esc, str)):
                raise SqlEvaluationError(
                    f"a LIKE pattern and escape must be strings, not {form!r} and {esc!r}"
                )
            try:
                regex = values.like_pattern(form, esc)
            except ValueError as error:
                raise SqlEvaluationError(str(error)) from None
            if not isinstance(value, str):
                return None
            return (regex.fullmatch(value) is not None) != negated

        return self._fold(evaluate_dynamic, [operand, pattern, escape], node)

    def _in(self, node: Tree[Token]) -> _Compiled:
        children = node.children
        negated = _is_token(children[1], "NOT")
        operand = self.value(_tree(node, 0))
        first_item = 3 if negated else 2
        items = [self.value(_tree(node, index)) for index in range(first_item, len(children))]
        text = operand.evaluate
        equals = values.equals
        if all(item.is_constant for item in items):
            constants = [item.constant for item in items]
            strings = frozenset(c for c in constants if isinstance(c, str))
            others = [c for c in constants if c is not None and not isinstance(c, str)]

            def evaluate(message: RuleMessage) -> bool | None:
                value = text(message)
                if value is None:
                    return None
                if isinstance(value, str):
                    return (value in strings) != negated
                return any(equals(value, c) is True for c in others) != negated

            return self._fold(evaluate, [operand], node)
        getters = [item.evaluate for item in items]

        def evaluate_dynamic(message: RuleMessage) -> bool | None:
            value = text(message)
            if value is None:
                return None
            found = any(equals(value, get(message)) is True for get in getters)
            return found != negated

        return self._fold(evaluate_dynamic, [operand, *items], node)

    def _is_null(self, node: Tree[Token]) -> _Compiled:
        negated = _is_token(node.children[2], "NOT")
        read = self.property_of(_tree(node, 0), "IS NULL").read()

        def evaluate(message: RuleMessage) -> bool:
            return (read(message) is None) != negated

        return _Compiled(evaluate)

    def _exists(self, node: Tree[Token]) -> _Compiled:
        target = self.property_of(_tree(node, 1), "EXISTS")
        if target.scope == "user":
            return _Compiled(user_exists(target.name))
        read = target.read()
        return _Compiled(lambda message: read(message) is not None)

    # --- expressions: evaluate to a value, None for NULL or unknown ----------------------

    def value(self, node: Tree[Token]) -> _Compiled:
        kind = str(node.data)
        if kind in ("binary", "unary"):
            return self._operation(node)
        if kind == "property":
            return _Compiled(self.property(node).read())
        if kind == "function":
            return self._function(node)
        token = node.children[0]
        assert isinstance(token, Token)
        if kind == "integer":
            number = int(token)
            if number > _INT64_MAX:
                raise self.error(f"the integer {token} is out of Int64's range", token)
            return _constant(number)
        if kind == "decimal":
            return _constant(float(token))
        if kind == "string":
            return _constant(token[1:-1].replace("''", "'"))
        if kind == "parameter":
            name = token[1:]
            if name not in self.parameters:
                raise self.error(f"no value was given for the parameter {token}", token)
            return _constant(self.parameters[name])
        return _constant({"true": True, "false": False, "null": None}[kind])

    def _operation(self, node: Tree[Token]) -> _Compiled:
        if str(node.data) == "unary":
            operand = self.value(_tree(node, 1))
            apply = values.negate if str(node.children[0]) == "-" else values.plus
            inner = operand.evaluate
            return self._fold(lambda message: apply(inner(message)), [operand], node)
        left, right = self.value(_tree(node, 0)), self.value(_tree(node, 2))
        operation = values.ARITHMETIC[str(node.children[1])]
        first, second = left.evaluate, right.evaluate

        def evaluate(message: RuleMessage) -> Any:
            return operation(first(message), second(message))

        return self._fold(evaluate, [left, right], node)

    def _function(self, node: Tree[Token]) -> _Compiled:
        name_token = node.children[0]
        assert isinstance(name_token, Token)
        name = str(name_token).casefold()
        arguments = [self.value(_tree(node, index)) for index in range(1, len(node.children))]
        if name == "newid":
            if arguments:
                raise self.error("newid() takes no arguments", name_token)
            return _Compiled(lambda message: uuid.uuid4())
        if name in ("property", "p"):
            if len(arguments) != 1:
                raise self.error(f"{name_token}(name) takes one argument", name_token)
            return self._property_function(arguments[0], _tree(node, 1))
        raise self.error(
            f"unsupported function {name_token}(): Service Bus SQL has newid(), property(name)"
            " and p(name)",
            name_token,
        )

    def _property_function(self, argument: _Compiled, at: Tree[Token]) -> _Compiled:
        if argument.is_constant:
            if not isinstance(argument.constant, str):
                raise self.error("property(name) takes a string", at)
            target = _property_path(argument.constant)
            if target is None:
                raise self.error(f"unknown system property {argument.constant}", at)
            return _Compiled(target.read())
        name_of = argument.evaluate

        def evaluate(message: RuleMessage) -> Any:
            path = name_of(message)
            if path is None:
                return None
            if not isinstance(path, str):
                raise SqlEvaluationError(f"property(name) takes a string, not {path!r}")
            target = _property_path(path)
            if target is None:
                raise SqlEvaluationError(f"unknown system property {path}")
            if target.scope == "sys":
                return message.system_property(target.name)
            properties = message.application_properties
            key = find_key(properties, target.name)
            return None if key is None else properties[key]

        return _Compiled(evaluate)

    # --- properties -----------------------------------------------------------------------

    def property(self, node: Tree[Token]) -> _Property:
        tokens = [child for child in node.children if isinstance(child, Token)]
        identifier = tokens[-1]
        if identifier.type == "DELIMITED":
            name = identifier[1:-1].replace("]]", "]")
        elif identifier.type == "QUOTED":
            name = identifier[1:-1].replace('""', '"')
        elif identifier.upper() in self.keywords:
            raise self.error(
                f"{identifier} is a reserved word: write [{identifier}] for a property so named",
                identifier,
            )
        else:
            name = str(identifier)
        if not name:
            raise self.error("a property name cannot be empty", identifier)
        if len(tokens) == 1:
            return _Property("user", name)
        scope = tokens[0]
        if scope.casefold() == "user":
            return _Property("user", name)
        if scope.casefold() == "sys":
            canonical = system_property_name(name)
            if canonical is None:
                raise self.error(f"unknown system property sys.{name}", identifier)
            return _Property("sys", canonical)
        raise self.error(
            f"unknown scope {scope}: a property is sys.<name>, user.<name> or <name>", scope
        )

    def property_of(self, node: Tree[Token], construct: str) -> _Property:
        if str(node.data) != "property":
            raise self.error(f"{construct} takes a property, not an expression", node)
        return self.property(node)

    # --- actions --------------------------------------------------------------------------

    def statement(self, node: Tree[Token]) -> actions.Statement:
        target = self.property(_tree(node, 1))
        if target.scope == "sys":
            if target.name in READ_ONLY_SYSTEM_PROPERTIES:
                raise self.error(f"sys.{target.name} is read-only", _tree(node, 1))
            if target.name not in WRITABLE_SYSTEM_PROPERTIES:
                raise self.error(f"setting sys.{target.name} is not supported", _tree(node, 1))
        if str(node.data) == "remove":
            if target.scope == "sys":
                return actions.clear_system(target.name)
            return actions.remove_user(target.name)
        value = self.value(_tree(node, 3))
        if target.scope == "user":
            return actions.set_user(target.name, value.evaluate)
        if value.is_constant:
            try:
                actions.system_value(target.name, value.constant)
            except SqlEvaluationError as error:
                raise self.error(str(error), _tree(node, 3)) from None
        return actions.set_system(target.name, value.evaluate)

    def _check_parameters(self, given: Mapping[str, Any]) -> dict[str, Any]:
        checked = {}
        for key, value in given.items():
            name = key.removeprefix("@")
            if value is not None and not isinstance(value, _PARAMETER_TYPES):
                raise SqlFilterError(
                    f"the parameter @{name} is a {type(value).__name__}; a parameter is a"
                    " string, number, bool, UUID, datetime, timedelta or None",
                    expression=self.expression,
                )
            if isinstance(value, int) and not -_INT64_MAX - 1 <= value <= _INT64_MAX:
                raise SqlFilterError(
                    f"the parameter @{name} is out of Int64's range", expression=self.expression
                )
            checked[name] = value
        return checked


def _tree(node: Tree[Token], index: int) -> Tree[Token]:
    child = node.children[index]
    assert isinstance(child, Tree), child
    return child


def _is_token(child: Tree[Token] | Token, kind: str) -> bool:
    return isinstance(child, Token) and child.type == kind


def _property_path(path: str) -> _Property | None:
    """What property('...') names: "sys.<Name>", "user.<name>" or a user property's name."""
    scope, dot, name = path.partition(".")
    if dot and scope.casefold() == "sys":
        canonical = system_property_name(name)
        return None if canonical is None else _Property("sys", canonical)
    if dot and scope.casefold() == "user":
        return _Property("user", name)
    return _Property("user", path)


def compile_filter(
    expression: str, parameters: Mapping[str, Any] | None = None
) -> Callable[[RuleMessage], bool]:
    """The SqlFilter `expression` as a function telling whether a message matches.

    The function returns True only when the condition is true: false and unknown (a missing
    property, NULL, mismatched types) do not match. It raises SqlEvaluationError when the rule
    fails on that message. Raises SqlFilterError when the expression is not valid.
    """
    compiler = Compiler(expression, parameters, FILTER_KEYWORDS)
    condition = compiler.predicate(_tree(parse(expression, "filter"), 0))
    if condition.is_constant:
        matched = condition.constant is True
        return lambda message: matched
    evaluate = condition.evaluate
    return lambda message: evaluate(message) is True


def compile_action(
    expression: str, parameters: Mapping[str, Any] | None = None
) -> Callable[[RuleMessage], None]:
    """The SqlRuleAction `expression` as a function that changes a message in place.

    Statements run in order, each seeing what the ones before it did. A statement that fails
    (SqlEvaluationError) leaves the earlier ones applied: run it on the subscription's copy.
    Raises SqlFilterError when the expression is not valid.
    """
    compiler = Compiler(expression, parameters, ACTION_KEYWORDS)
    tree = parse(expression, "action")
    statements = [compiler.statement(_tree(tree, index)) for index in range(len(tree.children))]

    def run(message: RuleMessage) -> None:
        for statement in statements:
            statement(message)

    return run
