"""Service Bus SQL filters, SQL rule actions and correlation filters, on in-memory messages.

Each table row is one behaviour the Service Bus docs describe (or that the module's docstring
says it chose where they are silent), with the answer a subscription would give.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from servicebus_emulator.sql_filter import (
    SYSTEM_PROPERTIES,
    WRITABLE_SYSTEM_PROPERTIES,
    RuleMessage,
    SqlEvaluationError,
    SqlFilterError,
    compile_action,
    compile_correlation_filter,
    compile_filter,
)

ENQUEUED = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
GONE: Any = object()  # an action's expected outcome: the property was removed


@dataclass
class InMemoryRuleMessage:
    """A message as a rule sees it: user properties and the broker's system properties."""

    application_properties: dict[str, Any] = field(default_factory=dict)
    system: dict[str, Any] = field(default_factory=dict)

    def system_property(self, name: str) -> Any:
        assert name in SYSTEM_PROPERTIES, name  # the module asks by canonical name only
        return self.system.get(name)

    def set_system_property(self, name: str, value: Any) -> None:
        assert name in WRITABLE_SYSTEM_PROPERTIES, name
        self.system[name] = value


class UnreadableMessage:
    """A message no rule may look at: a constant filter must not."""

    @property
    def application_properties(self) -> MutableMapping[str, Any]:
        raise AssertionError("the filter read the application properties")

    def system_property(self, name: str) -> Any:
        raise AssertionError(f"the filter read sys.{name}")

    def set_system_property(self, name: str, value: Any) -> None:
        raise AssertionError(f"the filter set sys.{name}")


def order(**extra: Any) -> InMemoryRuleMessage:
    properties: dict[str, Any] = {
        "color": "red",
        "quantity": 10,
        "price": 2.5,
        "flag": True,
        "text_ten": "10",
        "nothing": None,
        "zero": 0,
        "my-prop": "x",
        "code": "ABC%",
        "under": "a_b",
        "pct": "100%",
        "multiline": "a\nb",
        "pattern": "r%",
        "name_of_color": "color",
        "café": "yes",
        "Label": "user-label",
    }
    properties.update(extra)
    return InMemoryRuleMessage(
        properties,
        {
            "MessageId": "m-1",
            "CorrelationId": "corr",
            "Label": "bus-stop",
            "To": "store-5",
            "ReplyTo": "replies",
            "ReplyToSessionId": "rs-1",
            "SessionId": "s-1",
            "ContentType": "application/json",
            "SequenceNumber": 42,
            "DeliveryCount": 0,
            "Size": 100,
            "EnqueuedTimeUtc": ENQUEUED,
            "TimeToLive": timedelta(minutes=5),
        },
    )


def matches(expression: str, message: RuleMessage | None = None, **parameters: Any) -> bool:
    return compile_filter(expression, parameters)(message or order())


FILTERS = [
    # comparison operators
    ("quantity = 10", True),
    ("quantity = 11", False),
    ("quantity <> 11", True),
    ("quantity <> 10", False),
    ("quantity != 11", True),
    ("quantity != 10", False),
    ("quantity < 11", True),
    ("quantity < 10", False),
    ("quantity <= 10", True),
    ("quantity <= 9", False),
    ("quantity > 9", True),
    ("quantity > 10", False),
    ("quantity >= 10", True),
    ("quantity >= 11", False),
    ("color = 'red'", True),
    ("color = 'RED'", False),  # strings compare case-sensitively
    ("color <> 'blue'", True),
    ("flag = TRUE", True),
    ("flag = false", False),
    ("flag <> FALSE", True),
    # numeric promotion between int and double
    ("quantity = 10.0", True),
    ("price = 2.5", True),
    ("price < 3", True),
    ("price > 2", True),
    # a string with a number, a bool with a number, ordering strings: unknown, never a match
    ("text_ten = 10", False),
    ("NOT text_ten = 10", False),
    ("text_ten <> 10", False),
    ("'10' = 10", False),
    ("flag = 1", False),
    ("color > 'a'", False),
    ("NOT color > 'a'", False),
    # missing properties and NULL
    ("missing = 1", False),
    ("missing <> 1", False),
    ("NOT missing = 1", False),
    ("nothing = 1", False),
    ("color = NULL", False),
    ("NOT color = NULL", False),
    ("NULL = NULL", False),
    ("missing IS NULL", True),
    ("missing IS NOT NULL", False),
    ("nothing IS NULL", True),
    ("color IS NULL", False),
    ("color IS NOT NULL", True),
    ("sys.PartitionKey IS NULL", True),
    ("sys.Label IS NOT NULL", True),
    ("EXISTS(color)", True),
    ("EXISTS(missing)", False),
    ("NOT EXISTS(missing)", True),
    ("EXISTS(nothing)", True),
    ("EXISTS(sys.Label)", True),
    ("EXISTS(sys.PartitionKey)", False),
    ("missing + 1 = 1", False),
    ("NOT missing + 1 = 1", False),
    ("-missing = 1", False),
    ("missing LIKE '%'", False),
    ("missing NOT LIKE 'x'", False),
    ("missing IN (1, 2)", False),
    ("missing NOT IN (1, 2)", False),
    # precedence: NOT over AND over OR, arithmetic as usual, parentheses
    ("color = 'blue' AND quantity = 10 OR price = 2.5", True),
    ("color = 'red' OR quantity = 10 AND price = 1", True),
    ("(color = 'red' OR quantity = 10) AND price = 1", False),
    ("NOT color = 'blue' AND quantity = 11", False),
    ("NOT (color = 'blue' AND quantity = 11)", True),
    ("NOT NOT color = 'red'", True),
    ("((color = 'red'))", True),
    ("2 + 3 * 4 = 14", True),
    ("(2 + 3) * 4 = 20", True),
    ("10 - 2 - 3 = 5", True),
    ("100 / 10 / 5 = 2", True),
    ("-2 * 3 = -6", True),
    ("2 - -1 = 3", True),
    ("-quantity = -10", True),
    ("+quantity = 10", True),
    ("(quantity + 2) * 2 = 24", True),
    ("quantity + 2 * 2 = 14", True),
    # arithmetic follows C#: Int64 integer division truncates, % takes the dividend's sign
    ("7 / 2 = 3", True),
    ("-7 / 2 = -3", True),
    ("7 / -2 = -3", True),
    ("-7 % 3 = -1", True),
    ("7 % -3 = 1", True),
    ("quantity % 4 = 2", True),
    ("7 / 2.0 = 3.5", True),
    ("price * 2 = 5", True),
    ("price - 0.5 = 2", True),
    ("9223372036854775807 + 1 < 0", True),
    ("price / 0 > 1E308", True),
    ("price / zero > 1E308", True),
    ("price % 0 = price % 0", False),  # NaN
    ("'ab' + 'c' = 'abc'", True),
    ("color + 1 = 'red1'", False),
    ("1.5E3 = 1500", True),
    ("0.5E-2 = 0.005", True),
    (".5 = 0.5", True),
    ("2. = 2", True),
    ("'it''s' = 'it' + '''' + 's'", True),
    # LIKE
    ("color LIKE 'r%'", True),
    ("color LIKE 'R%'", False),
    ("color LIKE '_ed'", True),
    ("color LIKE '__'", False),
    ("color LIKE 're'", False),
    ("color LIKE '%e%'", True),
    ("color LIKE '%'", True),
    ("color LIKE 'r.d'", False),
    ("color NOT LIKE 'b%'", True),
    ("color NOT LIKE 'r%'", False),
    ("code LIKE 'ABC\\%' ESCAPE '\\'", True),
    ("code LIKE 'ABC!%' ESCAPE '!'", True),
    ("color LIKE 'ABC!%' ESCAPE '!'", False),
    ("under LIKE 'a!_b' ESCAPE '!'", True),
    ("color LIKE 'r!_d' ESCAPE '!'", False),
    ("pct LIKE '100%%' ESCAPE '%'", True),
    ("code LIKE 'AB!C%' ESCAPE '!'", True),
    ("multiline LIKE 'a%b'", True),
    ("color LIKE pattern", True),
    ("color LIKE pattern ESCAPE '!'", True),
    ("color LIKE '%' ESCAPE missing", False),
    ("quantity LIKE '1%'", False),
    ("sys.Label LIKE '%bus%'", True),
    # IN
    ("color IN ('red', 'blue')", True),
    ("color IN ('RED')", False),
    ("color IN ('blue', 'green')", False),
    ("color NOT IN ('blue')", True),
    ("color NOT IN ('blue', 'red')", False),
    ("quantity IN (1, 10)", True),
    ("quantity IN (10.0)", True),
    ("quantity IN ('10')", False),
    ("quantity NOT IN ('10')", True),
    ("color IN (sys.Label, 'red')", True),
    ("sys.Label IN (color, 'x')", False),
    ("quantity IN (5 + 5)", True),
    ("sys.To IN ('store-5', 'store-6') OR color = 'x'", True),
    # property names
    ("user.color = 'red'", True),
    ("USER.COLOR = 'red'", True),
    ("Color = 'red'", True),
    ("[my-prop] = 'x'", True),
    ("user.[my-prop] = 'x'", True),
    ("\"my-prop\" = 'x'", True),
    ("café = 'yes'", True),
    ("Label = 'user-label'", True),
    ("sys.Label = 'bus-stop'", True),
    ("sys.label = 'bus-stop'", True),
    ("SYS.LABEL = 'bus-stop'", True),
    ("sys.Subject = 'bus-stop'", True),
    ("sys.MessageId = 'm-1'", True),
    ("sys.messageid = 'm-2'", False),
    ("sys.CorrelationId LIKE 'co%'", True),
    ("sys.To = 'store-5'", True),
    ("sys.ReplyTo = 'replies'", True),
    ("sys.ReplyToSessionId = 'rs-1'", True),
    ("sys.SessionId = 's-1'", True),
    ("sys.ContentType = 'application/json'", True),
    ("sys.SequenceNumber = 42", True),
    ("sys.SequenceNumber > 41 AND sys.SequenceNumber < 43", True),
    ("sys.DeliveryCount = 0", True),
    ("sys.Size >= 100", True),
    # functions
    ("property('color') = 'red'", True),
    ("p('user.color') = 'red'", True),
    ("P('sys.Label') = 'bus-stop'", True),
    ("p(name_of_color) = 'red'", True),
    ("p(missing) = 'red'", False),
    ("newid() = newid()", False),
    ("newid() <> newid()", True),
    # constants: TrueFilter and FalseFilter
    ("1=1", True),
    ("1=0", False),
    ("TRUE = TRUE", True),
    ("'a' <> 'a'", False),
]


@pytest.mark.parametrize(("expression", "expected"), FILTERS, ids=[row[0] for row in FILTERS])
def test_a_filter_matches_as_service_bus_documents(expression: str, expected: bool) -> None:
    assert matches(expression) is expected


# The AND and OR tables of the SqlFilter docs, with T, F and U (unknown) made two ways:
# from the message's properties (evaluated per message) and from constants (folded).
TRUTH = {
    "message": {"T": "color = 'red'", "F": "color = 'blue'", "U": "missing = 1"},
    "constant": {"T": "1 = 1", "F": "1 = 0", "U": "NULL = 1"},
}
AND = {"TT": "T", "TF": "F", "TU": "U", "FT": "F", "FF": "F", "FU": "F", "UT": "U", "UF": "F"}
OR = {"TT": "T", "TF": "T", "TU": "T", "FT": "T", "FF": "F", "FU": "U", "UT": "T", "UF": "U"}
AND["UU"] = OR["UU"] = "U"


def truth(expression: str) -> str:
    if matches(expression):
        return "T"
    if matches(f"NOT ({expression})"):
        return "F"
    return "U"


@pytest.mark.parametrize("source", sorted(TRUTH))
@pytest.mark.parametrize(("operator", "table"), [("AND", AND), ("OR", OR)])
@pytest.mark.parametrize("pair", sorted(AND))
def test_and_or_not_follow_the_documented_three_valued_tables(
    source: str, operator: str, table: dict[str, str], pair: str
) -> None:
    left, right = (TRUTH[source][value] for value in pair)
    assert truth(f"({left}) {operator} ({right})") == table[pair]


@pytest.mark.parametrize("source", sorted(TRUTH))
def test_not_unknown_is_unknown(source: str) -> None:
    assert truth(f"NOT ({TRUTH[source]['U']})") == "U"
    assert truth(f"NOT ({TRUTH[source]['T']})") == "F"


def test_one_compiled_filter_answers_for_each_message_on_its_own() -> None:
    condition = compile_filter("color = 'red' AND quantity > 5")

    assert condition(order()) is True
    assert condition(order(color="blue")) is False
    assert condition(order(quantity=5)) is False
    assert condition(order()) is True


@pytest.mark.parametrize(("expression", "expected"), [("1=1", True), ("1=0", False)])
def test_true_and_false_filters_never_read_the_message(expression: str, expected: bool) -> None:
    assert compile_filter(expression)(UnreadableMessage()) is expected


def test_an_exact_property_name_wins_over_one_that_differs_only_in_case() -> None:
    message = order(Color="upper")

    assert matches("color = 'red'", message)
    assert matches("Color = 'upper'", message)


def test_system_and_user_properties_of_the_same_name_stay_apart() -> None:
    assert matches("sys.Label = 'bus-stop' AND Label = 'user-label'")


PARAMETERS: list[tuple[str, dict[str, Any], bool]] = [
    ("color = @c", {"@c": "red"}, True),
    ("color = @c", {"c": "blue"}, False),
    ("quantity > @n", {"@n": 5}, True),
    ("price = @p", {"@p": 2.5}, True),
    ("flag = @f", {"@f": True}, True),
    ("sys.EnqueuedTimeUtc > @since", {"@since": ENQUEUED - timedelta(seconds=1)}, True),
    ("sys.EnqueuedTimeUtc > @since", {"@since": ENQUEUED}, False),
    ("sys.EnqueuedTimeUtc = @naive", {"@naive": ENQUEUED.replace(tzinfo=None)}, True),
    (
        "sys.EnqueuedTimeUtc - @since = @gap",
        {"@since": ENQUEUED - timedelta(hours=1), "@gap": timedelta(hours=1)},
        True,
    ),
    ("sys.EnqueuedTimeUtc + sys.TimeToLive > @t", {"@t": ENQUEUED}, True),
    ("sys.TimeToLive <= @ttl", {"@ttl": timedelta(minutes=5)}, True),
    ("color = @nothing", {"@nothing": None}, False),
    ("p(@name) = 'red'", {"@name": "color"}, True),
    ("@id = @id", {"@id": uuid.UUID(int=1)}, True),
]


@pytest.mark.parametrize(
    ("expression", "parameters", "expected"), PARAMETERS, ids=[row[0] for row in PARAMETERS]
)
def test_parameters_stand_where_the_expression_names_them(
    expression: str, parameters: dict[str, Any], expected: bool
) -> None:
    assert compile_filter(expression, parameters)(order()) is expected


FILTER_ERRORS = [
    ("", "syntax error: unexpected end", 1),
    ("color = ", "syntax error: unexpected end", 9),
    ("color == 'red'", "syntax error: unexpected '='", 8),
    ("color = 'red", "unexpected character", 9),
    ("(color = 'red'", "unexpected end", 15),
    ("color = 'red')", "unexpected ')'", 14),
    ("color ~ 1", "unexpected character '~'", 7),
    ("quantity BETWEEN 1 AND 20", "unexpected 'BETWEEN'", 10),
    ("color", "unexpected end", 6),
    ("TRUE", "unexpected end", 5),
    ("sys.Nope = 1", "unknown system property sys.Nope", 5),
    ("other.color = 1", "unknown scope other", 1),
    ("and = 1", "and is a reserved word", 1),
    ("color = null + NOT", "NOT is a reserved word", 16),
    ("quantity = Like", "Like is a reserved word", 12),
    ("[] = 1", "a property name cannot be empty", 1),
    ("foo(1) = 1", "unsupported function foo()", 1),
    ("newid(1) = 1", "newid() takes no arguments", 1),
    ("property() = 1", "property(name) takes one argument", 1),
    ("property(1) = 1", "property(name) takes a string", 10),
    ("p('sys.Nope') = 1", "unknown system property sys.Nope", 3),
    ("color LIKE 'x' ESCAPE 'ab'", "the LIKE escape must be one character", 23),
    ("color LIKE 'x' ESCAPE ''", "the LIKE escape must be one character", 23),
    ("color LIKE 'x!' ESCAPE '!'", "ends with its escape character", 12),
    ("color LIKE 5", "the LIKE pattern must be a string", 12),
    ("(quantity + 1) IS NULL", "IS NULL takes a property", 2),
    ("EXISTS(1)", "EXISTS takes a property", 8),
    ("EXISTS(newid())", "EXISTS takes a property", 8),
    ("p('missing') IS NULL", "IS NULL takes a property", 1),
    ("@x IS NULL", "IS NULL takes a property", 1),
    ("quantity = 9223372036854775808", "out of Int64's range", 12),
    ("quantity = 1 / 0", "integer division by zero", 12),
    ("quantity = 5 % 0", "integer remainder by zero", 12),
    ("color = @missing", "no value was given for the parameter @missing", 9),
    ("color = 'red'\nAND quantity ~ 1", "unexpected character '~'", 14),
]


@pytest.mark.parametrize(
    ("expression", "reason", "column"), FILTER_ERRORS, ids=[row[0] for row in FILTER_ERRORS]
)
def test_an_invalid_filter_is_refused_with_where(expression: str, reason: str, column: int) -> None:
    with pytest.raises(SqlFilterError) as raised:
        compile_filter(expression, {"@x": 1})

    error = raised.value
    assert isinstance(error, ValueError)
    assert reason in str(error)
    assert error.column == column
    assert error.expression == expression
    assert error.position is not None
    assert f"column {column}" in str(error)


def test_an_error_on_a_later_line_gives_its_line() -> None:
    with pytest.raises(SqlFilterError) as raised:
        compile_filter("color = 'red'\nAND quantity ~ 1")

    assert (raised.value.line, raised.value.column, raised.value.position) == (2, 14, 27)
    assert "line 2, column 14" in str(raised.value)


@pytest.mark.parametrize(
    ("parameters", "reason"),
    [
        ({"@p": [1]}, "the parameter @p is a list"),
        ({"@p": 2**63}, "the parameter @p is out of Int64's range"),
    ],
)
def test_a_parameter_of_a_type_service_bus_does_not_take_is_refused(
    parameters: dict[str, Any], reason: str
) -> None:
    with pytest.raises(SqlFilterError, match=re.escape(reason)):
        compile_filter("color = @p", parameters)


EVALUATION_ERRORS = [
    ("quantity / zero = 1", "integer division by zero"),
    ("quantity % zero = 1", "integer remainder by zero"),
    ("color LIKE 'r%' + sys.Label ESCAPE color", "the LIKE escape must be one character"),
    ("color LIKE 'x!' + sys.Label + '!' ESCAPE '!'", "ends with its escape character"),
    ("color LIKE quantity", "a LIKE pattern and escape must be strings"),
    ("p(quantity) = 1", "property(name) takes a string"),
    ("p('sys.' + color) = 1", "unknown system property sys.red"),
]


@pytest.mark.parametrize(
    ("expression", "reason"), EVALUATION_ERRORS, ids=[row[0] for row in EVALUATION_ERRORS]
)
def test_a_filter_that_fails_on_a_message_raises_an_evaluation_error(
    expression: str, reason: str
) -> None:
    condition = compile_filter(expression)

    with pytest.raises(SqlEvaluationError, match=re.escape(reason)):
        condition(order())


ACTIONS: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]] = [
    # (action, parameters, user properties expected to change, system properties expected)
    ("SET color = 'blue'", {}, {"color": "blue"}, {}),
    ("SET Color = 'blue'", {}, {"color": "blue"}, {}),
    ("SET new_one = 1", {}, {"new_one": 1}, {}),
    ("SET quantity = quantity / 2", {}, {"quantity": 5}, {}),
    ("SET quantity = 2.5", {}, {"quantity": 2.5}, {}),
    ("SET a = 1; SET b = a + 1", {}, {"a": 1, "b": 2}, {}),
    ("SET a = 1 SET b = 2", {}, {"a": 1, "b": 2}, {}),
    ("SET a = 1, SET b = 2", {}, {"a": 1, "b": 2}, {}),
    ("SET a = 1;", {}, {"a": 1}, {}),
    ("set a = 1; remove color;", {}, {"a": 1, "color": GONE}, {}),
    ("REMOVE color", {}, {"color": GONE}, {}),
    ("REMOVE COLOR", {}, {"color": GONE}, {}),
    ("REMOVE missing", {}, {}, {}),
    ("SET x = missing", {}, {"x": None}, {}),
    ("SET user.[my-prop] = 'y'", {}, {"my-prop": "y"}, {}),
    ("SET c = @c", {"@c": "green"}, {"c": "green"}, {}),
    ("SET sys.CorrelationId = 'low'", {}, {}, {"CorrelationId": "low"}),
    ("SET sys.Label = sys.Label + '-x'", {}, {}, {"Label": "bus-stop-x"}),
    ("SET sys.Subject = 'news'", {}, {}, {"Label": "news"}),
    ("SET sys.To = color", {}, {}, {"To": "red"}),
    ("SET sys.To = missing", {}, {}, {"To": None}),
    ("REMOVE sys.ReplyTo", {}, {}, {"ReplyTo": None}),
    (
        "SET sys.TimeToLive = @ttl",
        {"@ttl": timedelta(hours=1)},
        {},
        {"TimeToLive": timedelta(hours=1)},
    ),
    (
        "SET sys.ScheduledEnqueueTimeUtc = @at",
        {"@at": ENQUEUED.replace(tzinfo=None)},
        {},
        {"ScheduledEnqueueTimeUtc": ENQUEUED},
    ),
    (
        "SET sys.PartitionKey = 'pk'; SET sys.ContentType = 'text/plain'",
        {},
        {},
        {"PartitionKey": "pk", "ContentType": "text/plain"},
    ),
    (
        "SET quantity = quantity / 2; REMOVE priority;SET sys.CorrelationId = 'low';",
        {},
        {"quantity": 5, "priority": GONE},
        {"CorrelationId": "low"},
    ),
]


@pytest.mark.parametrize(
    ("action", "parameters", "user", "system"), ACTIONS, ids=[row[0] for row in ACTIONS]
)
def test_an_action_changes_the_message_as_documented(
    action: str, parameters: dict[str, Any], user: dict[str, Any], system: dict[str, Any]
) -> None:
    message = order(priority="high")
    before = order(priority="high")

    compile_action(action, parameters)(message)

    expected_user = {
        name: value
        for name, value in (before.application_properties | user).items()
        if value is not GONE
    }
    assert message.application_properties == expected_user
    assert message.system == before.system | system


def test_set_keeps_a_double_a_double() -> None:
    message = order()

    compile_action("SET price = 3")(message)

    assert message.application_properties["price"] == 3.0
    assert isinstance(message.application_properties["price"], float)


def test_set_keeps_the_spelling_of_the_property_it_replaces() -> None:
    message = order()

    compile_action("SET COLOR = 'blue'")(message)

    assert "COLOR" not in message.application_properties
    assert message.application_properties["color"] == "blue"


def test_set_message_id_to_newid_gives_each_message_a_fresh_guid() -> None:
    action = compile_action("SET sys.MessageId = newid()")
    first, second = order(), order()

    action(first)
    action(second)

    assert uuid.UUID(first.system["MessageId"]) != uuid.UUID(second.system["MessageId"])


ACTION_ERRORS = [
    ("", "syntax error: unexpected end", 1),
    ("REMOVE", "syntax error: unexpected end", 7),
    ("SET a == 1", "syntax error: unexpected '='", 8),
    ("SET a = 1;;", "syntax error: unexpected ';'", 11),
    ("UPDATE a = 1", "syntax error", 1),
    ("SET a = 1 AND b = 2", "syntax error", 11),
    ("SET set = 1", "set is a reserved word", 5),
    ("SET sys.SequenceNumber = 1", "sys.SequenceNumber is read-only", 5),
    ("SET sys.EnqueuedTimeUtc = NULL", "sys.EnqueuedTimeUtc is read-only", 5),
    ("REMOVE sys.DeliveryCount", "sys.DeliveryCount is read-only", 8),
    ("SET sys.ViaPartitionKey = 'x'", "setting sys.ViaPartitionKey is not supported", 5),
    ("SET sys.Nope = 1", "unknown system property sys.Nope", 9),
    ("SET sys.To = 5", "sys.To takes a string, not int 5", 14),
    ("SET sys.TimeToLive = 'PT1M'", "sys.TimeToLive takes a timedelta", 22),
    ("SET a = 1 / 0", "integer division by zero", 9),
    ("SET a = foo()", "unsupported function foo()", 9),
]


@pytest.mark.parametrize(
    ("action", "reason", "column"), ACTION_ERRORS, ids=[row[0] for row in ACTION_ERRORS]
)
def test_an_invalid_action_is_refused_with_where(action: str, reason: str, column: int) -> None:
    with pytest.raises(SqlFilterError) as raised:
        compile_action(action)

    assert reason in str(raised.value)
    assert raised.value.column == column


@pytest.mark.parametrize(
    ("action", "reason"),
    [
        ("SET sys.To = quantity", "sys.To takes a string, not int 10"),
        ("SET sys.ScheduledEnqueueTimeUtc = color", "takes a datetime, not str 'red'"),
        ("SET a = quantity / zero", "integer division by zero"),
    ],
)
def test_an_action_that_fails_on_a_message_raises_an_evaluation_error(
    action: str, reason: str
) -> None:
    with pytest.raises(SqlEvaluationError, match=re.escape(reason)):
        compile_action(action)(order())


def test_an_action_that_fails_part_way_leaves_the_statements_before_it_applied() -> None:
    message = order()

    with pytest.raises(SqlEvaluationError):
        compile_action("SET a = 1; SET b = quantity / zero; SET c = 3")(message)

    assert message.application_properties["a"] == 1
    assert "b" not in message.application_properties
    assert "c" not in message.application_properties


CORRELATIONS: list[tuple[dict[str, Any], bool]] = [
    ({"correlation_id": "corr"}, True),
    ({"correlation_id": "CORR"}, False),  # case-sensitive
    ({"correlation_id": "other"}, False),
    ({"message_id": "m-1"}, True),
    ({"to": "store-5"}, True),
    ({"reply_to": "replies"}, True),
    ({"subject": "bus-stop"}, True),
    ({"subject": "user-label"}, False),  # Label is the system property, not the user one
    ({"session_id": "s-1"}, True),
    ({"reply_to_session_id": "rs-1"}, True),
    ({"content_type": "application/json"}, True),
    ({"content_type": "application/JSON"}, False),
    ({"properties": {"color": "red"}}, True),
    ({"properties": {"color": "Red"}}, False),
    ({"properties": {"COLOR": "red"}}, True),
    ({"properties": {"quantity": 10}}, True),
    ({"properties": {"quantity": 10.0}}, True),
    ({"properties": {"quantity": "10"}}, False),  # a string never equals a number
    ({"properties": {"text_ten": 10}}, False),
    ({"properties": {"flag": True}}, True),
    ({"properties": {"missing": "x"}}, False),
    ({"properties": {"color": "red", "quantity": 11}}, False),  # all must match
    ({"correlation_id": "corr", "subject": "bus-stop", "properties": {"color": "red"}}, True),
    ({"correlation_id": "corr", "subject": "bus-stop", "properties": {"color": "blue"}}, False),
    (
        {
            "correlation_id": "corr",
            "message_id": "m-1",
            "to": "store-5",
            "reply_to": "replies",
            "subject": "bus-stop",
            "session_id": "s-1",
            "reply_to_session_id": "rs-1",
            "content_type": "application/json",
            "properties": {"color": "red", "quantity": 10},
        },
        True,
    ),
    ({}, True),
]


@pytest.mark.parametrize(
    ("fields", "expected"), CORRELATIONS, ids=[str(f) for f, _ in CORRELATIONS]
)
def test_a_correlation_filter_matches_when_every_field_given_is_equal(
    fields: dict[str, Any], expected: bool
) -> None:
    assert compile_correlation_filter(**fields)(order()) is expected


def test_a_correlation_filter_on_a_property_the_message_lacks_does_not_match() -> None:
    message = order()
    del message.system["ReplyTo"]

    assert compile_correlation_filter(reply_to="replies")(message) is False
