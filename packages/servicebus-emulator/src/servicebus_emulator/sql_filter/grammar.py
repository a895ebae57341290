"""The grammar of Service Bus SQL filters and rule actions, and the parser built from it.

It is the documented grammar (SQLFilter syntax, SQLRuleAction syntax) with the usual precedence:
OR < AND < NOT < comparison < + - < * / % < unary + -. Keywords are case-insensitive. Which
names are reserved, what a property may be and the rules on types are checked by the compiler,
which can point at the offending place.
"""

from __future__ import annotations

import functools

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from .errors import SqlFilterError

GRAMMAR = r"""
filter: or_pred
// Statements are separated by an optional `;` (the docs' example) or `,` (the documented
// grammar's `<statement> [, ...n]`); a last `;` may end the action.
action: statement ((_SEMI | _COMMA)? statement)* _SEMI?

?or_pred: and_pred | or_pred OR and_pred -> or_
?and_pred: not_pred | and_pred AND not_pred -> and_
?not_pred: simple_pred | NOT not_pred -> not_
?simple_pred: expr (EQ | NE | LT | LE | GT | GE) expr -> compare
    | expr NOT? LIKE expr (ESCAPE expr)? -> like
    | expr NOT? IN _LPAR expr (_COMMA expr)* _RPAR -> in_
    | expr IS NOT? NULL -> is_null
    | EXISTS _LPAR expr _RPAR -> exists
    | _LPAR or_pred _RPAR

statement: SET property EQ expr -> set_
    | REMOVE property -> remove

?expr: product
    | expr PLUS product -> binary
    | expr MINUS product -> binary
?product: unary
    | product (STAR | SLASH | PERCENT) unary -> binary
?unary: primary
    | (MINUS | PLUS) unary -> unary
?primary: INTEGER -> integer
    | DECIMAL -> decimal
    | STRING -> string
    | TRUE -> true
    | FALSE -> false
    | NULL -> null
    | PARAMETER -> parameter
    | property
    | NAME _LPAR (expr (_COMMA expr)*)? _RPAR -> function
    | _LPAR expr _RPAR
property: (NAME DOT)? (NAME | DELIMITED | QUOTED)

AND: "AND"i
OR: "OR"i
NOT: "NOT"i
LIKE: "LIKE"i
ESCAPE: "ESCAPE"i
IN: "IN"i
IS: "IS"i
NULL: "NULL"i
EXISTS: "EXISTS"i
TRUE: "TRUE"i
FALSE: "FALSE"i
SET: "SET"i
REMOVE: "REMOVE"i
EQ: "="
NE: "<>" | "!="
LE: "<="
GE: ">="
LT: "<"
GT: ">"
PLUS: "+"
MINUS: "-"
STAR: "*"
SLASH: "/"
PERCENT: "%"
DOT: "."
_LPAR: "("
_RPAR: ")"
_COMMA: ","
_SEMI: ";"
DECIMAL.2: /(\d+\.\d*|\.\d+)([eE][+-]?\d+)?|\d+[eE][+-]?\d+/
INTEGER: /\d+/
STRING: /'(?:[^']|'')*'/
DELIMITED: /\[(?:[^\]]|\]\])*\]/
QUOTED: /"(?:[^"]|"")*"/
PARAMETER: /@\w+/
NAME: /[^\W\d_]\w*/
%import common.WS
%ignore WS
"""

# Reserved words: a regular identifier cannot be one of these (write [and] for such a property).
FILTER_KEYWORDS = frozenset(
    {"AND", "OR", "NOT", "LIKE", "ESCAPE", "IN", "IS", "NULL", "EXISTS", "TRUE", "FALSE"}
)
ACTION_KEYWORDS = FILTER_KEYWORDS | {"SET", "REMOVE"}


@functools.cache
def _parser() -> Lark:
    # Built on first use (under 0.1 s), then shared by every compile.
    return Lark(GRAMMAR, start=["filter", "action"], parser="lalr", propagate_positions=True)


def parse(expression: str, start: str) -> Tree[Token]:
    """The parse tree of a filter (`start="filter"`) or action (`start="action"`) expression.

    Raises SqlFilterError with the position of the first token that does not fit.
    """
    try:
        return _parser().parse(expression, start=start)
    except UnexpectedInput as error:
        raise _syntax_error(error, expression, start) from None


def _syntax_error(error: UnexpectedInput, expression: str, start: str) -> SqlFilterError:
    position: int | None = None
    if isinstance(error, UnexpectedToken):
        token = error.token
        if token.type == "$END":
            what, position = "unexpected end of the expression", len(expression)
        else:
            what, position = f"unexpected {str(token)!r}", token.start_pos
    elif isinstance(error, UnexpectedCharacters):
        position = error.pos_in_stream
        what = f"unexpected character {error.char!r}"
    else:
        what = "syntax error"
    kind = "SQL filter" if start == "filter" else "SQL rule action"
    return SqlFilterError(f"{kind} syntax error: {what}", expression=expression, position=position)
