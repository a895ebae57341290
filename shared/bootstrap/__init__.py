"""The composition root: the one place that builds real adapters and wires the services.

This package holds all of the wiring: the ``Container`` (``root``), ``parts`` (each real
adapter built from the clients it needs, imported on first use), the pipelines the app runs
(``pipeline_list`` and ``declared``, wired by ``wiring``) and ``operator_desk`` (the
operator's actions bound to the ports they use).

Nothing is built at import time. Tests and the local host install a container of their own
with ``use_container``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .root import Container, Part

if TYPE_CHECKING:
    from .wiring import AppPipelines

__all__ = ["Container", "Part", "app_pipelines", "container", "use_container"]


def app_pipelines(environ: Mapping[str, str] | None = None) -> AppPipelines:
    """The pipelines the app runs, wired (``declared``): imported on first use, as they
    import every pipeline's tasks."""
    from .declared import app_pipelines as declared

    return declared(environ)


_container: Container | None = None
_lock = threading.Lock()


def container() -> Container:
    global _container
    with _lock:
        if _container is None:
            _container = Container()
        return _container


def use_container(new: Container | None) -> None:
    """Install a container (tests, the local host); ``None`` goes back to the default."""
    global _container
    with _lock:
        _container = new
