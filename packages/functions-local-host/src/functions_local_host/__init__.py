"""A local Azure Functions host for ``function_app.py`` (Core Tools cannot run here).

``python -m functions_local_host`` runs the app like ``func start``; tests use ``LocalHost``.
"""

from .config import HostConfigurationError
from .host import FUNCTION_KEY_PREFIX, HOST_KEY_SETTING, MASTER_KEY_SETTING, LocalHost

__all__ = [
    "FUNCTION_KEY_PREFIX",
    "HOST_KEY_SETTING",
    "MASTER_KEY_SETTING",
    "HostConfigurationError",
    "LocalHost",
]
