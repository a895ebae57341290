"""Who may do what: three roles, each allowing what the one below it allows and more.

- **Reader** sees: every page and read of the console and the operator API, the audit trail
  and the CSV exports.
- **Operator** also acts on failed sessions as they were archived: replay, resolve, bulk
  replays and resolutions (by group or time window), and pausing or resuming a pipeline.
- **Editor** also edits messages before replaying them.

A person signed in to the console in Azure gets a role as an Entra app role of the console's app
registration (``APP_ROLES``: the values ``infra/app/console-roles.json`` declares); an API
caller, and a person signed in locally with a key, by the key's SHA-256 digest
(``KEY_ROLES``, ``shared.config``). The role checks themselves are the bindings'
(``shared.entrypoints.roles``): a refused request does nothing and records nothing.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .errors import Forbidden


class Role(enum.IntEnum):
    """Ordered: a role allows everything the roles below it allow."""

    READER = 1
    OPERATOR = 2
    EDITOR = 3

    @property
    def label(self) -> str:
        return self.name.capitalize()


# The Entra app roles' values (the ``roles`` claim of a signed-in user), by role.
APP_ROLES: dict[str, Role] = {f"Console.{role.label}": role for role in Role}


def role_named(name: str) -> Role:
    """``Reader``, ``Operator`` or ``Editor`` (any case); raises ``ValueError`` otherwise."""
    for role in Role:
        if name.strip().lower() == role.name.lower():
            return role
    raise ValueError(f"{name!r} is not a role: use {', '.join(r.label for r in Role)}")


def highest(roles: Iterable[Role]) -> Role | None:
    """The most a holder of ``roles`` may do; None for no role."""
    return max(roles, default=None)


def app_role_of(claims: Iterable[str]) -> Role | None:
    """The highest role among the app role values of a signed-in user's ``roles`` claims
    (values that are not this app's roles are ignored)."""
    return highest(APP_ROLES[value] for value in claims if value in APP_ROLES)


def key_digest(key: str) -> str:
    """The SHA-256 of a function key, hex: what ``KEY_ROLES`` names a key by."""
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class Caller:
    """Who sent a request: ``name`` is what the audit trail records (a person's sign-in name,
    or ``function key <digest>``), ``role`` what they may do (None: nothing)."""

    name: str
    role: Role | None

    @property
    def role_label(self) -> str:
        return self.role.label if self.role else "no role"

    def check(self, required: Role, action: str) -> None:
        """Raises ``Forbidden`` unless the caller's role allows ``required``."""
        if self.role is not None and self.role >= required:
            return
        have = f"the role {self.role.label}" if self.role else "no role of this app"
        raise Forbidden(
            f"{action} needs the role {required.label} (or higher); {self.name} has {have}. "
            "Nothing was done. Ask whoever runs this app for the role.",
            role=self.role.label if self.role else None,
            required=required.label,
        )


@dataclass(frozen=True)
class ConsoleAccessSettings:
    """Who may use the operator console and the operator API, and with which role (read from
    the settings by ``shared.config.console_access``). The console: in Azure, whoever App
    Service Authentication signed in (``easy_auth``), with the app role their sign-in carries;
    locally, whoever presents one of the host's function ``keys`` or a key ``key_roles``
    names. An API caller: by the function key the host admitted. A key's role: ``key_roles``
    (SHA-256 hex digest -> role), else ``default_key_role`` (None: no role)."""

    keys: frozenset[str] = frozenset()
    easy_auth: bool = False
    key_roles: Mapping[str, Role] = field(default_factory=dict)
    default_key_role: Role | None = Role.EDITOR

    def role_of_key(self, key: str, *, admitted: bool = False) -> Role | None:
        """The role of ``key``; ``admitted``: the host checked the key already (an API
        request), so a key it accepted but ``key_roles`` does not name gets the default."""
        named = self.key_roles.get(key_digest(key))
        if named is not None:
            return named
        return self.default_key_role if admitted or key in self.keys else None

    def knows(self, key: str) -> bool:
        """Whether the console may let ``key`` in locally: a host key or a listed key."""
        return key in self.keys or key_digest(key) in self.key_roles
