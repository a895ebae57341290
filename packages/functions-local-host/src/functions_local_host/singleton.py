"""The Functions host's listener singleton lock, as a blob lease in AzureWebJobsStorage.

A timer trigger's listener runs on one instance of an app at a time: the WebJobs SDK wraps it
in a ``SingletonListener`` (``[Singleton(Mode = SingletonMode.Listener)]`` on the timer
extension's ``TimerListener``), which starts it only once it holds the lock
``{hostId}/{function full name}.Listener`` (``SingletonManager.FormatLockId``). The lock is a
lease on the blob ``locks/{lock id}`` of the container ``azure-webjobs-hosts``
(``BlobLeaseDistributedLockManager``), taken for ``singleton.listenerLockPeriod`` (60 s) and
renewed before it runs out; an instance without it tries again every
``singleton.listenerLockRecoveryPollingInterval`` (60 s). An instance that dies keeps the lock
until its lease expires; then another one's next try takes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.storage.blob import BlobClient, BlobLeaseClient, BlobServiceClient

logger = logging.getLogger("functions_local_host")

HOSTS_CONTAINER = "azure-webjobs-hosts"
# The host's id: Azure derives it from the site's name; this setting overrides it there too.
HOST_ID_SETTING = "AzureFunctionsWebHost__hostid"
# How long before its end a lease is renewed, as a share of its period.
_RENEW_AT = 0.5


def host_id(settings: Mapping[str, str], script: Path) -> str:
    """The host id: the setting when given, else one derived from the script root, so that
    every instance of one app on one machine shares it (at most 32 characters, lower case,
    as the host's)."""
    given = settings.get(HOST_ID_SETTING, "").strip()
    if given:
        return given.lower()[:32]
    digest = hashlib.sha256(str(script.parent.resolve()).encode()).hexdigest()
    return f"local-{digest}"[:32]


def listener_lock_id(host: str, function_name: str) -> str:
    """``{hostId}/Host.Functions.{name}.Listener``: the function's full name in the Functions
    host is ``Host.Functions.<name>``."""
    return f"{host}/Host.Functions.{function_name}.Listener"


class ListenerLock:
    """One listener's singleton lock. ``acquire()`` tries once; while held, a thread renews the
    lease every half period, and ``held`` turns false when a renewal fails (another instance
    may then take it). ``release()`` lets it go at once."""

    def __init__(
        self,
        connection_string: str,
        lock_id: str,
        *,
        period: float = 60.0,
        recovery_interval: float = 60.0,
    ) -> None:
        self.lock_id = lock_id
        self.period = period
        self.recovery_interval = recovery_interval
        service = BlobServiceClient.from_connection_string(connection_string)
        self._container = service.get_container_client(HOSTS_CONTAINER)
        self._blob: BlobClient = self._container.get_blob_client(f"locks/{lock_id}")
        self._lease: BlobLeaseClient | None = None
        self._held_until = 0.0
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._guard = threading.Lock()

    @property
    def held(self) -> bool:
        return self._lease is not None and time.monotonic() < self._held_until

    def acquire(self) -> bool:
        """Take the lease if no other instance holds it; True when this one holds it."""
        if self.held:
            return True
        self._ensure_blob()
        lease = BlobLeaseClient(self._blob)
        started = time.monotonic()
        try:
            lease.acquire(lease_duration=int(self.period))
        except HttpResponseError as error:
            if error.status_code == 409:  # leased by another instance
                return False
            raise
        with self._guard:
            self._lease = lease
            self._held_until = started + self.period
        self._stop.clear()
        self._renewer = threading.Thread(
            target=self._renew, name=f"lease {self.lock_id}", daemon=True
        )
        self._renewer.start()
        logger.info("Singleton lock acquired (%s)", self.lock_id)
        return True

    def release(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(5)
        with self._guard:
            lease, self._lease = self._lease, None
        if lease is not None:
            try:
                lease.release()
                logger.info("Singleton lock released (%s)", self.lock_id)
            except HttpResponseError as error:  # expired and taken, or storage gone
                logger.debug("Releasing %s: %s", self.lock_id, error)

    def _renew(self) -> None:
        while not self._stop.wait(self.period * _RENEW_AT):
            with self._guard:
                lease = self._lease
            if lease is None:
                return
            started = time.monotonic()
            try:
                lease.renew()
            except Exception as error:
                logger.warning("Singleton lock lost (%s): %s", self.lock_id, error)
                with self._guard:
                    self._lease = None
                return
            with self._guard:
                self._held_until = started + self.period

    def _ensure_blob(self) -> None:
        try:
            self._blob.get_blob_properties()
            return
        except ResourceNotFoundError:
            pass
        with contextlib.suppress(ResourceExistsError):
            self._container.create_container()
        try:
            self._blob.upload_blob(b"", overwrite=False)
        except (ResourceExistsError, HttpResponseError) as error:
            # Another instance created it first (or holds a lease on it already).
            if getattr(error, "status_code", None) not in (409, 412):
                raise
