"""Two things Azure decides for the Python worker, decided here by the same rules.

- **Which runtime.** For Python 3.13+, Azure installs the ``azure-functions-runtime`` that the
  app's ``requirements.txt`` names ("Python runtime version control" in Microsoft's Python
  developer reference, learn.microsoft.com/azure/azure-functions/functions-reference-python).
  This host runs the one installed in its own environment, so it refuses an app whose
  ``requirements.txt`` pins another: what runs here is what runs there.
- **How many threads.** The worker runs synchronous functions on a ``ThreadPoolExecutor`` of
  ``PYTHON_THREADPOOL_THREAD_COUNT`` threads (``azure_functions_runtime/utils/threadpool.py``,
  ``start_threadpool_executor``); unset, ``max_workers=None``, which Python 3.13 turns into
  ``min(32, (os.process_cpu_count() or 1) + 4)`` (the ``concurrent.futures`` docs, "Changed in
  version 3.13"). Counted on the Azure instance's CPUs, not this machine's: a Flex Consumption
  instance of 2048 MB (infra's ``instanceMemoryMB``) has about one vCPU, so five threads.
"""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

from .config import HostConfigurationError

RUNTIME_DISTRIBUTION = "azure-functions-runtime"
THREAD_COUNT_SETTING = "PYTHON_THREADPOOL_THREAD_COUNT"
# vCPUs of the instance infra deploys (Flex Consumption, 2048 MB): "available CPUs ... are
# provided proportional to a specific instance size" (Flex Consumption plan docs).
AZURE_INSTANCE_CPUS = 1
_PIN = re.compile(r"^azure[-_.]functions[-_.]runtime\s*==\s*([^\s;#,]+)\s*(?:[;#].*)?$", re.I)


def installed_runtime_version() -> str:
    """The version of ``azure-functions-runtime`` this host drives."""
    return importlib.metadata.version(RUNTIME_DISTRIBUTION)


def pinned_runtime_version(requirements: Path) -> str | None:
    """The exact ``azure-functions-runtime==X`` that ``requirements`` pins; None when the file
    is absent or pins no exact version."""
    if not requirements.is_file():
        return None
    for line in requirements.read_text().splitlines():
        if match := _PIN.match(line.strip()):
            return match.group(1)
    return None


def check_runtime_pin(script_root: Path) -> None:
    """Refuse an app whose ``requirements.txt`` pins a runtime other than the installed one."""
    requirements = script_root / "requirements.txt"
    pinned = pinned_runtime_version(requirements)
    installed = installed_runtime_version()
    if pinned is not None and pinned != installed:
        raise HostConfigurationError(
            f"{requirements} pins {RUNTIME_DISTRIBUTION}=={pinned}, which Azure runs, but this "
            f"host runs {installed}: install the pinned version (make setup) so both agree."
        )


def azure_default_thread_count(instance_cpus: int = AZURE_INSTANCE_CPUS) -> int:
    """The worker's thread pool in Azure when ``PYTHON_THREADPOOL_THREAD_COUNT`` is unset:
    Python 3.13's ``ThreadPoolExecutor`` default on the instance's CPUs."""
    return min(32, max(instance_cpus, 1) + 4)
