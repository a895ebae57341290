"""What every console page goes through: who may see it and act on it (``console_view``: signed
in, with the role the view needs), the CSRF check of every POST, the services' errors as pages,
and signing in and out; plus the static assets.

The routes are anonymous to the Functions host: the console lets people in itself
(``access``: a function key kept in a cookie locally, App Service Authentication
in Azure).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

import azure.functions as func

from ...bootstrap import container
from ...domain.errors import PipelineError, ServiceUnavailable, TooLarge
from ...domain.roles import Role
from ..http import detail_of, retry_after, status_of, traced
from ..http_input import route_value
from ..roles import REQUIRED_ROLE, required_role
from .access import (
    CSRF_FIELD,
    KEY_COOKIE,
    KEY_PATTERN,
    Operator,
    cookie,
    csrf_ok,
    identify,
    is_key,
)
from .render import PAGE_HEADERS, STATIC_TYPES, render, static_file

logger = logging.getLogger(__name__)
bp = func.Blueprint()

ANONYMOUS = func.AuthLevel.ANONYMOUS
FORM_MAX_BYTES = 64 * 1024


@dataclass(frozen=True)
class Visit:
    """One request to the console: who makes it, where the console lives, what they sent."""

    req: func.HttpRequest
    operator: Operator
    base: str  # the console's path, ``/console``
    form: dict[str, str] = field(default_factory=dict)

    def page(
        self, template: str, *, http_status: int = 200, **context: object
    ) -> func.HttpResponse:
        return _html(
            http_status,
            render(template, base=self.base, operator=self.operator, **context),
        )


View = Callable[[Visit], func.HttpResponse]


def console_view(view: View) -> Callable[[func.HttpRequest], func.HttpResponse]:
    """Let the operator in (or show the sign-in page with 401), check their role (403 and
    nothing done when it is lower than the view's: the role it declares with ``@requires``,
    else Reader to read and Operator to POST), check the CSRF token of a POST (403 without
    it), and turn the services' errors into pages. Each request is a span, as the API's are
    (``traced``)."""
    declared = required_role(view)
    any_role = getattr(view, OPEN_TO_EVERY_ROLE, False)

    def wrapper(req: func.HttpRequest) -> func.HttpResponse:
        base = console_base(req.url)
        settings = container().settings.console
        operator = identify(settings, req.headers, path=base, secure=_secure(req))
        if operator is None:
            return _sign_in(base, status=401, next_path=urlsplit(req.url).path)
        needed = declared or (Role.READER if req.method in ("GET", "HEAD") else Role.OPERATOR)
        if not any_role and not operator.may(needed):
            return _refused(base, operator, needed, f"{req.method} {urlsplit(req.url).path}")
        try:
            form = _form(req) if req.method == "POST" else {}
        except TooLarge as error:
            return _error(base, operator, 413, error.title, detail_of(error))
        if req.method == "POST" and not csrf_ok(operator, form.get(CSRF_FIELD), req.headers):
            return _error(base, operator, 403, "This form has expired", _CSRF_HELP)
        visit = Visit(req, operator, base, form)
        try:
            response = view(visit)
        except PipelineError as error:
            if isinstance(error, ServiceUnavailable):
                logger.warning("%s: %s", view.__name__, error)
            response = error_page(visit, status_of(error), error.title, detail_of(error))
            response.headers.update(retry_after(error))
        except Exception:
            logger.exception("%s failed", view.__name__)
            response = error_page(visit, 500, "Internal error", _BUG)
        if operator.set_cookie:
            response.headers["Set-Cookie"] = operator.set_cookie
        return response

    # The worker binds the trigger by the parameter's name (req), so the view's own signature
    # must not show through (functools.wraps would expose it via __wrapped__).
    wrapper.__name__ = wrapper.__qualname__ = view.__name__
    wrapper.__doc__ = view.__doc__
    wrapper.__module__ = view.__module__
    setattr(wrapper, REQUIRED_ROLE, declared)
    return traced(wrapper)


# A view every signed-in person may use, whatever their role (signing out).
OPEN_TO_EVERY_ROLE = "open_to_every_role"


def _refused(base: str, operator: Operator, needed: Role, action: str) -> func.HttpResponse:
    """403: the operator's role does not allow the view; nothing was done."""
    has = f"the role {operator.role.label}" if operator.role else "no role of this app"
    detail = (
        f"{action} needs the role {needed.label} (or higher); you ({operator.name}) have {has}. "
        "Nothing was done. Ask whoever runs this app for the role."
    )
    return _error(base, operator, 403, "Your role does not allow this", detail)


_CSRF_HELP = (
    "The request did not carry this console's form token, so it was not carried out. Go back, "
    "reload the page and submit it again."
)
_BUG = "The page failed on an error in the app, which is logged. Nothing more was done."


# -- signing in and out ----------------------------------------------------------------------


@bp.route(route="console/sign-in", methods=["GET", "POST"], auth_level=ANONYMOUS)
@traced
def console_sign_in(req: func.HttpRequest) -> func.HttpResponse:
    """Locally: ask for a function key once and keep it in a cookie. With App Service
    Authentication the platform signs people in; this page only sends them on."""
    base = console_base(req.url)
    settings = container().settings.console
    if req.method == "GET" or settings.easy_auth:
        return _sign_in(base, status=200, next_path=req.params.get("next"))
    try:
        form = _form(req)
    except TooLarge as error:
        return _error(base, None, 413, error.title, detail_of(error))
    site = (req.headers.get("sec-fetch-site") or "").lower()
    key = form.get("key", "").strip()
    if site not in ("", "same-origin", "none") or not KEY_PATTERN.fullmatch(key):
        return _sign_in(base, status=400, next_path=form.get("next"), error=_KEY_FORMAT)
    if not is_key(settings, key):
        return _sign_in(base, status=401, next_path=form.get("next"), error=_KEY_WRONG)
    response = redirect(_local_path(form.get("next"), base))
    response.headers["Set-Cookie"] = cookie(KEY_COOKIE, key, path=base, secure=_secure(req))
    return response


_KEY_FORMAT = "Paste a function key: letters, digits and - _ = / . + ~ only, at most 256."
_KEY_WRONG = "That is not one of this app's function keys (make up prints the host key)."


def every_role(view: View) -> View:
    """Mark a view that every signed-in person may use, whatever their role (signing out)."""
    setattr(view, OPEN_TO_EVERY_ROLE, True)
    return view


@bp.route(route="console/sign-out", methods=["POST"], auth_level=ANONYMOUS)
@console_view
@every_role
def console_sign_out(visit: Visit) -> func.HttpResponse:
    response = redirect(f"{visit.base}/sign-in")
    response.headers["Set-Cookie"] = cookie(
        KEY_COOKIE, "", path=visit.base, secure=_secure(visit.req), max_age=0
    )
    return response


@bp.route(route="console/static/{name}", methods=["GET"], auth_level=ANONYMOUS)
@traced
def console_static(req: func.HttpRequest) -> func.HttpResponse:
    """The console's stylesheet and htmx: public, like any site's assets."""
    name = route_value(req, "name")
    content = static_file(name)
    if content is None:
        return func.HttpResponse(b"", status_code=404)
    return func.HttpResponse(
        content,
        status_code=200,
        headers={
            "Content-Type": f"{STATIC_TYPES[name]}; charset=utf-8",
            "Cache-Control": "public, max-age=3600",
            "X-Content-Type-Options": "nosniff",
        },
    )


# -- helpers ---------------------------------------------------------------------------------


def console_base(url: str) -> str:
    """The console's own path (``/console``: host.json sets no route prefix)."""
    path = urlsplit(url).path
    return path[: path.index("/console") + len("/console")]


def _local_path(candidate: str | None, base: str) -> str:
    """Where to go after signing in: a page of the console, never another site. Anything
    else (another path, ``//``, a backslash, a space or a control character, which a
    ``Location`` header cannot carry or a browser reads otherwise) goes to the console's
    overview."""
    if (
        candidate
        and (candidate == base or candidate.startswith((f"{base}/", f"{base}?")))
        and _PRINTABLE_URL.fullmatch(candidate)
        and "//" not in candidate
        and "\\" not in candidate
    ):
        return candidate
    return base


# Printable ASCII without the space: what a path and query may hold once percent-encoded.
_PRINTABLE_URL = re.compile(r"[!-~]+")


def _secure(req: func.HttpRequest) -> bool:
    forwarded = (req.headers.get("x-forwarded-proto") or "").lower()
    return urlsplit(req.url).scheme == "https" or forwarded == "https"


def _form(req: func.HttpRequest) -> dict[str, str]:
    """The form's fields; ``TooLarge`` (413, saying so) over ``FORM_MAX_BYTES``, not an empty
    form that the CSRF check would call expired."""
    body = req.get_body()
    if len(body) > FORM_MAX_BYTES:
        raise TooLarge(
            "form", f"is {len(body)} bytes; at most {FORM_MAX_BYTES} bytes: send less and try again"
        )
    return dict(parse_qsl(body.decode("utf-8", errors="replace"), keep_blank_values=True))


def choice(value: str | None, allowed: tuple[str, ...], default: str) -> str:
    return value if value in allowed else default


def _html(status: int, text: str) -> func.HttpResponse:
    return func.HttpResponse(
        text,
        status_code=status,
        headers={"Content-Type": "text/html; charset=utf-8", **PAGE_HEADERS},
    )


def redirect(location: str) -> func.HttpResponse:
    return func.HttpResponse(b"", status_code=303, headers={"Location": location, **PAGE_HEADERS})


def _sign_in(
    base: str, *, status: int, next_path: str | None, error: str | None = None
) -> func.HttpResponse:
    easy_auth = container().settings.console.easy_auth
    page = render(
        "sign_in.html",
        base=base,
        operator=None,
        next_path=_local_path(next_path, base),
        error=error,
        easy_auth=easy_auth,
    )
    return _html(status, page)


def error_page(visit: Visit, status: int, title: str, detail: str) -> func.HttpResponse:
    return _error(visit.base, visit.operator, status, title, detail)


def _error(
    base: str, operator: Operator | None, status: int, title: str, detail: str
) -> func.HttpResponse:
    page = render(
        "error.html",
        base=base,
        operator=operator,
        status=status,
        title=title,
        detail=detail,
    )
    return _html(status, page)
