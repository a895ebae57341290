"""Who may use the console, with which role, and the CSRF token each of their forms carries.

Locally the console asks once for a key (one of the host's function keys, or a key
``KEY_ROLES`` lists by its digest) and keeps it in an HttpOnly, SameSite=Strict cookie scoped
to the console's path; the key's role is ``KEY_ROLES``'s, else ``DEFAULT_KEY_ROLE``; the CSRF
token is an HMAC of that key, so only a page the console rendered can know it. Behind App
Service Authentication (Easy Auth) the platform signs the user in, names them in
``X-MS-CLIENT-PRINCIPAL-NAME`` and passes their claims, the app roles among them, in
``X-MS-CLIENT-PRINCIPAL`` (Base64 JSON ``{"claims": [{"typ", "val"}], "role_typ"}``:
https://learn.microsoft.com/azure/app-service/configure-authentication-user-identities#decode-the-client-principal-header).
It strips both headers from what clients send. The CSRF token is then a random value kept in a
cookie and echoed by every form (double submit). Every POST is also refused when the browser
says it came from another site (``Sec-Fetch-Site``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from http.cookies import SimpleCookie

from ...config import ConsoleAccessSettings
from ...domain.audit import key_holder
from ...domain.roles import Caller, Role, app_role_of

KEY_COOKIE = "console_key"
CSRF_COOKIE = "console_csrf"
CSRF_FIELD = "csrf_token"
PRINCIPAL_HEADER = "x-ms-client-principal-name"
CLAIMS_HEADER = "x-ms-client-principal"
ROLES_CLAIM = "roles"  # Entra ID's app roles (role_typ names it in the header too)
# Function keys are URL-safe base64 (the host's own) or whatever a local setting holds; a
# cookie value may not carry ';', ',', spaces or quotes.
KEY_PATTERN = re.compile(r"[A-Za-z0-9_\-=/.+~]{1,256}")
_SAME_SITE = frozenset({"same-origin", "none"})


@dataclass(frozen=True)
class Operator:
    """Someone the console let in: ``name`` and ``role`` go into the audit trail (the role
    decides what they may do; None: nothing), ``csrf_token`` into every form; ``set_cookie``
    is a cookie this response must set (Easy Auth's CSRF value)."""

    name: str
    csrf_token: str
    set_cookie: str | None = None
    role: Role | None = None

    @property
    def caller(self) -> Caller:
        return Caller(self.name, self.role)

    def may(self, role: Role) -> bool:
        """Whether the operator's role allows ``role``'s actions (the templates ask)."""
        return self.role is not None and self.role >= role


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
        role = app_role_of(signed_in_roles(headers.get(CLAIMS_HEADER)))
        token = cookies.get(CSRF_COOKIE, "")
        if len(token) >= 32:
            return Operator(name=name, csrf_token=token, role=role)
        token = secrets.token_urlsafe(32)
        return Operator(name, token, cookie(CSRF_COOKIE, token, path=path, secure=secure), role)
    key = cookies.get(KEY_COOKIE, "")
    if not key or not is_key(settings, key):
        return None
    return Operator(
        name=key_holder(key), csrf_token=csrf_token_for(key), role=settings.role_of_key(key)
    )


def signed_in_roles(header: str | None) -> list[str]:
    """The values of the ``roles`` claims (or of the claim type ``role_typ`` names) in App
    Service's ``X-MS-CLIENT-PRINCIPAL`` header; none when it is missing or unreadable."""
    if not header:
        return []
    try:
        principal = json.loads(base64.b64decode(header, validate=False))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return []
    if not isinstance(principal, dict) or not isinstance(principal.get("claims"), list):
        return []
    types = {ROLES_CLAIM, str(principal.get("role_typ") or ROLES_CLAIM)}
    return [
        str(claim.get("val"))
        for claim in principal["claims"]
        if isinstance(claim, dict) and claim.get("typ") in types
    ]


def is_key(settings: ConsoleAccessSettings, key: str) -> bool:
    """Whether ``key`` is one of the host's keys (compared in constant time) or a key
    ``KEY_ROLES`` lists (by its digest)."""
    known = any(hmac.compare_digest(key.encode(), k.encode()) for k in settings.keys)
    return known or settings.knows(key)


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
