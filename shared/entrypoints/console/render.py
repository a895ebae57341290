"""HTML from the console's templates. Every value is escaped unless a template says otherwise
(none does), so nothing read from the archive — an order's name, a dead letter's description,
a message body — can become markup or script."""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from ...domain.roles import Role
from .views import session_path, sessions_query

# style-src without 'unsafe-inline': htmx is told not to inject its indicator styles
# (htmx-config in base.html), and the templates carry no style or script of their own.
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    )
)
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
STATIC_TYPES = {"console.css": "text/css", "htmx.min.js": "text/javascript"}


@functools.cache
def _environment() -> Environment:
    environment = Environment(
        loader=PackageLoader("shared.entrypoints.console", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    # The links every page may draw: a session's page, a list of sessions by filters.
    environment.globals.update(session_path=session_path, query=sessions_query, roles=Role)
    return environment


def render(template: str, **context: Any) -> str:
    return _environment().get_template(template).render(**context)


@functools.cache
def static_file(name: str) -> bytes | None:
    """One of the console's own assets (``STATIC_TYPES``), or ``None``."""
    if name not in STATIC_TYPES:
        return None
    return (resources.files("shared.entrypoints.console") / "static" / name).read_bytes()
