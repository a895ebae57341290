"""Who may use the console, and the CSRF token each of their forms carries.

Locally the console asks once for one of the host's function keys and keeps it in an HttpOnly,
SameSite=Strict cookie scoped to the console's path; the CSRF token is an HMAC of that key, so
only a page the console rendered can know it. Behind App Service Authentication (Easy Auth)
the platform signs the user in and names them in ``X-MS-CLIENT-PRINCIPAL-NAME`` (it strips that
header from what clients send); the CSRF token is then a random value kept in a cookie and
echoed by every form (double submit). Every POST is also refused when the browser says it came
from another site (``Sec-Fetch-Site``).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from http.cookies import SimpleCookie

from ...config import ConsoleAccessSettings
from ...domain.audit import key_holder

KEY_COOKIE = "console_key"
CSRF_COOKIE = "console_csrf"
CSRF_FIELD = "csrf_token"
PRINCIPAL_HEADER = "x-ms-client-principal-name"
# Function keys are URL-safe base64 (the host's own) or whatever a local setting holds; a
# cookie value may not carry ';', ',', spaces or quotes.
KEY_PATTERN = re.compile(r"[A-Za-z0-9_\-=/.+~]{1,256}")
_SAME_SITE = frozenset({"same-origin", "none"})


@dataclass(frozen=True)
class Operator:
    """Someone the console let in: ``name`` goes into the audit trail, ``csrf_token`` into
    every form; ``set_cookie`` is a cookie this response must set (Easy Auth's CSRF value)."""

    name: str
    csrf_token: str
    set_cookie: str | None = None


def cookies_of(header: str | None) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header or "")
    except Exception:  # a malformed Cookie header is no cookie at all
        return {}
    return {name: morsel.value for name, morsel in jar.items()}


def identify(
    settings: ConsoleAccessSettings, headers: Mapping[str, str], *, path: str, secure: bool
) -> Operator | None:
    """The operator behind a request, or ``None`` when it must be refused. ``path`` is the
    console's base path (the cookies' scope)."""
    cookies = cookies_of(headers.get("cookie"))
    if settings.easy_auth:
        name = (headers.get(PRINCIPAL_HEADER) or "").strip()
        if not name:
            return None
        token = cookies.get(CSRF_COOKIE, "")
        if len(token) >= 32:
            return Operator(name=name, csrf_token=token)
        token = secrets.token_urlsafe(32)
        return Operator(name, token, cookie(CSRF_COOKIE, token, path=path, secure=secure))
    key = cookies.get(KEY_COOKIE, "")
    if not key or not is_key(settings, key):
        return None
    return Operator(name=key_holder(key), csrf_token=csrf_token_for(key))


def is_key(settings: ConsoleAccessSettings, key: str) -> bool:
    """Whether ``key`` is one of the host's keys (compared in constant time)."""
    return any(hmac.compare_digest(key.encode(), known.encode()) for known in settings.keys)


def csrf_token_for(key: str) -> str:
    return hmac.new(key.encode(), b"operator-console csrf", hashlib.sha256).hexdigest()


def csrf_ok(operator: Operator, submitted: str | None, headers: Mapping[str, str]) -> bool:
    """A POST is the operator's own when it carries their token and no browser says it came
    from another site."""
    site = (headers.get("sec-fetch-site") or "").lower()
    if site and site not in _SAME_SITE:
        return False
    return bool(submitted) and hmac.compare_digest(
        str(submitted).encode(), operator.csrf_token.encode()
    )


def cookie(name: str, value: str, *, path: str, secure: bool, max_age: int | None = None) -> str:
    """A Set-Cookie value: HttpOnly, SameSite=Strict, scoped to the console's ``path``."""
    parts = [f"{name}={value}", f"Path={path}", "HttpOnly", "SameSite=Strict"]
    if max_age is not None:
        parts.append(f"Max-Age={max_age}")
    if secure:
        parts.append("Secure")
    return "; ".join(parts)
