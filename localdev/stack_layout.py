"""Where the local stack's parts are and where they listen: the repository's files it reads,
the port each service wants, and the layout of a durable stack's data folder (``.data/``).
Standard library only, so ``make up``'s supervisor starts at once."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# The emulator config the infrastructure owns (the Docker emulator reads the same file).
SERVICE_BUS_CONFIG = REPO_ROOT / "infra" / "local" / "config.json"
SETTINGS_FILE = REPO_ROOT / "local.settings.json"
HOST_JSON = REPO_ROOT / "host.json"
APP_SCRIPT = REPO_ROOT / "function_app.py"
DATA_DIR = REPO_ROOT / ".data"


@dataclass(frozen=True)
class Ports:
    """The port each service wants; 0 means any free port."""

    http: int = 0
    blob: int = 0
    queue: int = 0
    table: int = 0
    servicebus: int = 0
    servicebus_http: int = 0
    smtp: int = 0
    email: int = 0


# What `func start`, Azurite and Microsoft's Service Bus emulator listen on (5300: its health
# port), so connection strings written for them work unchanged.
STANDARD_PORTS = Ports(
    http=7071,
    blob=10000,
    queue=10001,
    table=10002,
    servicebus=5672,
    servicebus_http=5300,
    smtp=1025,
    email=7075,  # the Communication Services Email stand-in (Azure has no local port for it)
)


@dataclass(frozen=True)
class DataLayout:
    """Where a durable stack keeps its state and logs (all under one folder)."""

    root: Path

    @property
    def azurite(self) -> Path:
        return self.root / "azurite"

    @property
    def servicebus(self) -> Path:
        return self.root / "servicebus"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def host_log(self) -> Path:
        return self.logs / "host.log"

    @property
    def lock(self) -> Path:
        return self.root / "stack.lock"

    @property
    def function_keys(self) -> Path:
        return self.root / "function-keys.json"

    @property
    def env_file(self) -> Path:
        return self.root / "stack.env"


def shown(path: Path) -> str:
    """``path`` relative to the current directory when it is under it, else absolute."""
    try:
        return str(path.resolve().relative_to(Path(os.getcwd()).resolve()))
    except ValueError:
        return str(path)
