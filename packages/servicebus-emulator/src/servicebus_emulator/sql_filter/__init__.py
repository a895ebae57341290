"""Service Bus subscription rules: SQL filters, SQL rule actions and correlation filters.

The subset of SQL-92 Azure Service Bus documents for `SqlRuleFilter` / `SqlRuleAction`
("Subscription Rule SQL Filter Syntax", "... SQL Action Syntax"), parsed with lark and compiled
once per rule into plain closures, so evaluating a rule for each message sent to a topic costs a
few Python calls and no parsing.

Interface
---------
`RuleMessage` (a Protocol) is what a rule sees of a message:

- `system_property(name) -> value | None`: `name` is one of `SYSTEM_PROPERTIES` (canonical
  BrokeredMessage names such as "MessageId", "Label", "SequenceNumber", "EnqueuedTimeUtc");
  None when the message has no such value. Ids and addresses as str, counts as int, instants
  as aware UTC datetimes, TimeToLive as a timedelta.
- `application_properties -> MutableMapping[str, Any]`: the user properties, changed in place
  by an action.
- `set_system_property(name, value)`: `name` is one of `WRITABLE_SYSTEM_PROPERTIES` (ContentType,
  CorrelationId, Label, MessageId, PartitionKey, ReplyTo, ReplyToSessionId,
  ScheduledEnqueueTimeUtc, SessionId, TimeToLive, To); value of that property's type, or None
  to clear it.

`compile_filter(expression, parameters=None) -> (message) -> bool`: True only when the
condition is true. `TrueFilter` is `compile_filter("1=1")`, `FalseFilter` `compile_filter("1=0")`
(both fold to constants). `compile_action(expression, parameters=None) -> (message) -> None`
runs SET / REMOVE statements in order on the message. `compile_correlation_filter(...)` takes
the CorrelationRuleFilter fields (correlation_id, message_id, to, reply_to, subject, session_id,
reply_to_session_id, content_type, properties). `parameters` are the SDKs' SqlRuleFilter /
SqlRuleAction parameters ({"@name": value}, "@" optional; str, int, float, bool, UUID, datetime,
timedelta or None), used where the expression says `@name`.

Errors: `SqlFilterError` (a ValueError) when an expression is compiled that Service Bus would
refuse: a syntax error, an unknown `sys.` property, an unknown function, a reserved word used as
a name, a read-only target... It carries `reason`, `expression`, `position` (0-based offset) and
`line` / `column` (1-based), and its message says where. `SqlEvaluationError` when a compiled
rule fails on one message (integer division by zero, a LIKE pattern taken from the message that
is not valid, a value an action cannot store in a system property). Service Bus dead-letters
such a message in the subscription when its DeadLetteringOnFilterEvaluationExceptions is on
(the default); an action that fails part-way has changed the message it ran on, so run actions
on the subscription's own copy.

How a subscription uses rules (topic-filters docs, for the broker that plugs this in): rules
without an action are ORed and give one copy; each rule with an action that matches gives its
own copy, the action run on it, carrying a `RuleName` property with the rule's name.

Filters
-------
`NOT`, `AND`, `OR` (that precedence, parentheses), comparisons `= <> != < <= > >=`,
`[NOT] LIKE pattern [ESCAPE char]` (`%` any run, `_` one character; pattern and escape are
expressions), `[NOT] IN (expr, ...)`, `property IS [NOT] NULL`, `EXISTS(property)`, arithmetic
`+ - * / %` and unary `+ -`, constants (integers as Int64, decimals and `1.5E3` as double,
'strings' with '' for a quote, TRUE, FALSE, NULL), `@parameters`, and the functions `newid()`
(a fresh UUID), `property(name)` / `p(name)` (the property a string names: "sys.Label",
"user.color" or "color"). Keywords and property names are case-insensitive; a user property
is matched exactly first, then ignoring case.

Properties: `sys.<Name>` (a system property; an unknown one is refused), `user.<name>` or a
bare `<name>` (a user property), `[any name]` with `]]` for `]`, `"any name"` with `""` for `"`.
A regular name is a letter then letters, digits or `_`, and not a reserved word.

Missing properties and NULL (documented): a missing user property is unknown; an operator with an
unknown or NULL operand is unknown (IN: when its left operand is); AND / OR / NOT use SQL's
three-valued tables; unknown is not a match, and neither is NOT unknown. `IS NULL` is true for a
missing property or a null value, `EXISTS` for a property that is there (even with a null
value; for a system property, one that has a value).

Types (Service Bus says C# operator binding): int and float compare and compute with numeric
promotion; integer `/` truncates and integer division by zero fails the evaluation; strings have
`=`, `<>` and `+` (concatenation) and compare ordinally, case-sensitively, LIKE too; bool, UUID
and bytes have `=` and `<>`; datetime and timedelta compare and do datetime arithmetic. Where the
docs are silent this module chooses, and says so: any other pairing, such as a string with a
number, is unknown, so `'10' = 10`, `'10' <> 10` and `'a' > 'b'` never match; an IN list item of
another type is simply not equal.

Actions
-------
`SET property = expression` and `REMOVE property`, separated by `;` (optional, so whitespace
alone also separates) or `,` (the documented `<statement> [, ...n]`); a final `;` is allowed.
SET on a user property creates it or replaces it (a number stored over a double stays a double,
the implicit conversion C# makes); an unknown result stores NULL. REMOVE deletes a user property
(every spelling of it) or clears a writable system property. SET on a system property needs a
value of its type (a UUID becomes its string); read-only ones (SequenceNumber, EnqueuedTimeUtc,
DeliveryCount, ...) are refused when the action is compiled.

Correlation filters: every field given must equal the message's (case-sensitive strings, the
SQL `=` for values, so the string "2" does not match the number 2); all must match.
"""

from .compiler import compile_action, compile_filter
from .correlation import compile_correlation_filter
from .errors import SqlEvaluationError, SqlFilterError
from .properties import (
    READ_ONLY_SYSTEM_PROPERTIES,
    SYSTEM_PROPERTIES,
    WRITABLE_SYSTEM_PROPERTIES,
    RuleMessage,
)

__all__ = [
    "READ_ONLY_SYSTEM_PROPERTIES",
    "SYSTEM_PROPERTIES",
    "WRITABLE_SYSTEM_PROPERTIES",
    "RuleMessage",
    "SqlEvaluationError",
    "SqlFilterError",
    "compile_action",
    "compile_correlation_filter",
    "compile_filter",
]
