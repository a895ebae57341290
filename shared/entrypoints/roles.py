"""The role each operator route needs, declared on the route in one line, and who an API caller
is (``shared.domain.roles``).

``@requires(Role.OPERATOR)`` under ``@endpoint`` (an API route) or under ``@console_view`` (a
console page or action) refuses a caller whose role is lower with ``403`` before the route runs:
nothing is done and nothing is audited. The declared role is kept on the function
(``required_role``) for the tests and docs/console.md's table of roles, which list every route
that declares one. A console view that declares none needs Reader to read (GET) and Operator
to act (POST): ``console_view`` applies that.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import azure.functions as func

from ..bootstrap import container
from ..domain.audit import key_holder
from ..domain.roles import Caller, Role
from .http import route_template

F = TypeVar("F", bound=Callable[..., Any])
REQUIRED_ROLE = "required_role"


def api_caller(req: func.HttpRequest) -> Caller:
    """Who sent an API request: the function key it carried (the host admitted it), named by
    a digest (``key_holder``), never written down, with the key's role (``KEY_ROLES``, else
    ``DEFAULT_KEY_ROLE``)."""
    access = container().settings.console
    key = req.headers.get("x-functions-key") or req.params.get("code") or ""
    if not key:
        return Caller("the API", access.default_key_role)
    return Caller(key_holder(key), access.role_of_key(key, admitted=True))


def requires(role: Role) -> Callable[[F], F]:
    """The least role the route needs. For an API route the caller is ``api_caller``; for a
    console view, the signed-in operator (``console_view`` checks it before the view runs)."""

    def declare(function: F) -> F:
        @functools.wraps(function)
        def wrapper(first: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(first, func.HttpRequest):
                api_caller(first).check(role, _action(first))
            return function(first, *args, **kwargs)

        setattr(wrapper, REQUIRED_ROLE, role)
        return wrapper  # type: ignore[return-value]

    return declare


def required_role(function: Callable[..., Any]) -> Role | None:
    """The role ``function`` (or anything it wraps, or the function a blueprint's route was
    built from) declares, else None."""
    built = getattr(function, "_function", None)  # azure.functions' FunctionBuilder
    current: Any = built.get_user_function() if built is not None else function
    while current is not None:
        role = getattr(current, REQUIRED_ROLE, None)
        if isinstance(role, Role):
            return role
        current = getattr(current, "__wrapped__", None)
    return None


def _action(req: func.HttpRequest) -> str:
    return f"{req.method} {route_template(req)}"
