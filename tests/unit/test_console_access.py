"""Who the console lets in, and which POSTs it accepts: locally a host key in a cookie, behind
App Service Authentication the signed-in user."""

from __future__ import annotations

import base64
import dataclasses
import json

import pytest

from shared.config import ConfigurationError, ConsoleAccessSettings, console_access
from shared.domain.roles import Role, key_digest
from shared.entrypoints.console.access import (
    CSRF_COOKIE,
    Operator,
    csrf_ok,
    csrf_token_for,
    identify,
    key_holder,
)

LOCAL = ConsoleAccessSettings(keys=frozenset({"host-key", "master-key"}))
EASY_AUTH = ConsoleAccessSettings(easy_auth=True)


def _identify(settings: ConsoleAccessSettings, **headers: str) -> Operator | None:
    return identify(settings, headers, path="/console", secure=True)


def test_the_settings_take_the_host_keys_and_easy_auth_from_the_app_settings() -> None:
    settings = console_access(
        {"FUNCTIONS_HOST_KEY": "h", "FUNCTIONS_MASTER_KEY": " ", "WEBSITE_AUTH_ENABLED": "True"}
    )
    assert settings == ConsoleAccessSettings(keys=frozenset({"h"}), easy_auth=True)
    assert console_access({}) == ConsoleAccessSettings()


def test_locally_a_host_key_in_the_cookie_lets_the_operator_in() -> None:
    operator = _identify(LOCAL, cookie="other=1; console_key=master-key")
    assert operator is not None
    assert operator.name == key_holder("master-key") != "master-key"  # never the key itself
    assert operator.csrf_token == csrf_token_for("master-key")
    assert operator.set_cookie is None


def test_locally_no_cookie_a_wrong_key_or_a_principal_header_is_refused() -> None:
    assert _identify(LOCAL) is None
    assert _identify(LOCAL, cookie="console_key=guess") is None
    assert _identify(LOCAL, cookie='console_key="host-key') is None  # malformed cookie
    # Without App Service Authentication in front, anyone could send this header.
    assert _identify(LOCAL, **{"x-ms-client-principal-name": "ada@example.com"}) is None


def test_no_key_configured_lets_no_one_in() -> None:
    assert _identify(ConsoleAccessSettings(), cookie="console_key=") is None


def test_behind_easy_auth_the_signed_in_user_is_named_and_gets_a_csrf_cookie() -> None:
    assert _identify(EASY_AUTH, cookie="console_key=host-key") is None
    operator = _identify(EASY_AUTH, **{"x-ms-client-principal-name": "ada@example.com"})
    assert operator is not None
    assert operator.name == "ada@example.com"
    assert operator.set_cookie is not None
    assert operator.set_cookie.startswith(f"{CSRF_COOKIE}={operator.csrf_token}; ")
    assert "HttpOnly" in operator.set_cookie and "SameSite=Strict" in operator.set_cookie
    assert "Path=/console" in operator.set_cookie and "Secure" in operator.set_cookie
    again = _identify(
        EASY_AUTH,
        cookie=f"{CSRF_COOKIE}={operator.csrf_token}",
        **{"x-ms-client-principal-name": "ada@example.com"},
    )
    assert again is not None
    assert (again.csrf_token, again.set_cookie) == (operator.csrf_token, None)


def test_a_post_needs_the_operator_token_and_no_cross_site_origin() -> None:
    operator = _identify(LOCAL, cookie="console_key=host-key")
    assert operator is not None
    token = operator.csrf_token
    assert csrf_ok(operator, token, {})
    assert csrf_ok(operator, token, {"sec-fetch-site": "same-origin"})
    assert not csrf_ok(operator, None, {})
    assert not csrf_ok(operator, "", {})
    assert not csrf_ok(operator, csrf_token_for("master-key"), {})
    assert not csrf_ok(operator, token, {"sec-fetch-site": "cross-site"})
    assert not csrf_ok(operator, token, {"sec-fetch-site": "same-site"})


# -- roles ------------------------------------------------------------------------------------


def _principal(*claims: tuple[str, str], role_typ: str = "roles") -> str:
    document = {
        "auth_typ": "aad",
        "claims": [{"typ": typ, "val": val} for typ, val in claims],
        "name_typ": "name",
        "role_typ": role_typ,
    }
    return base64.b64encode(json.dumps(document).encode()).decode()


def test_the_role_of_a_signed_in_user_is_the_highest_app_role_of_their_claims() -> None:
    def role(header: str | None) -> Role | None:
        headers = {"x-ms-client-principal-name": "ada@example.com"}
        if header is not None:
            headers["x-ms-client-principal"] = header
        operator = _identify(EASY_AUTH, **headers)
        assert operator is not None
        return operator.role

    assert role(_principal(("roles", "Console.Reader"), ("roles", "Console.Editor"))) == (
        Role.EDITOR
    )
    # App Service names the role claim's type; Entra ID's is "roles".
    uri = "http://schemas.microsoft.com/ws/2008/06/identity/claims/role"
    assert role(_principal((uri, "Console.Operator"), role_typ=uri)) == Role.OPERATOR
    assert role(_principal(("roles", "Admin"), ("groups", "Console.Editor"))) is None
    assert role(None) is None
    assert role("not base64 at all!") is None
    assert role(base64.b64encode(b'["a list"]').decode()) is None


def test_locally_a_key_s_role_is_its_key_roles_entry_else_the_default() -> None:
    listed = ConsoleAccessSettings(
        keys=frozenset({"host-key"}),
        key_roles={key_digest("reader-key"): Role.READER},
        default_key_role=Role.EDITOR,
    )
    reader = _identify(listed, cookie="console_key=reader-key")
    host = _identify(listed, cookie="console_key=host-key")
    assert reader is not None and reader.role == Role.READER  # a listed key gets in
    assert host is not None and host.role == Role.EDITOR
    assert _identify(listed, cookie="console_key=other-key") is None
    nobody = dataclasses.replace(listed, default_key_role=None)
    unlisted = _identify(nobody, cookie="console_key=host-key")
    assert unlisted is not None and unlisted.role is None and not unlisted.may(Role.READER)


def test_the_settings_read_key_roles_by_digest_and_refuse_what_is_not_one() -> None:
    digest = key_digest("k")
    settings = console_access({"KEY_ROLES": f" reader={digest.upper()}, Operator={'a' * 64} "})
    assert settings.key_roles == {digest: Role.READER, "a" * 64: Role.OPERATOR}
    assert settings.default_key_role == Role.EDITOR
    assert console_access({"DEFAULT_KEY_ROLE": "none"}).default_key_role is None
    for bad in ("Reader=abc", "Owner=" + "a" * 64, "Reader"):
        with pytest.raises(ConfigurationError, match="KEY_ROLES"):
            console_access({"KEY_ROLES": bad})
    with pytest.raises(ConfigurationError, match="DEFAULT_KEY_ROLE"):
        console_access({"DEFAULT_KEY_ROLE": "Admin"})
