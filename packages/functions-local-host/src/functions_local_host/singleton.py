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

A renewal that fails because storage cannot be reached is tried again every second until the
lease would have run out; only then, or when storage says the lease is another's (409, 412), is
the lock lost. The listener then seeks it again until it has it (``timers.py``); this instance
asks with the lease id it held, so storage gives it back its own lease if it is still active.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from azure.core.exceptions import (
    AzureError,
    HttpResponseError,
    ResourceExistsError,
    ResourceNotFoundError,
)
from azure.storage.blob import BlobClient, BlobLeaseClient, BlobServiceClient, ContainerClient

logger = logging.getLogger("functions_local_host")

HOSTS_CONTAINER = "azure-webjobs-hosts"
# The host's id: Azure derives it from the site's name; this setting overrides it there too.
HOST_ID_SETTING = "AzureFunctionsWebHost__hostid"
# How long before its end a lease is renewed, as a share of its period.
_RENEW_AT = 0.5
# After a renewal that could not reach storage, the next try comes this much later.
_RENEW_RETRY_SECONDS = 1.0
# What storage answers when the lease is not this instance's (any more).
_LEASE_NOT_OURS = (409, 412)
_CONNECT_SECONDS = 5
_READ_SECONDS = 10


def hosts_container(connection_string: str) -> ContainerClient:
    """The container of the host's locks and timer statuses. Each request is tried once, with
    short timeouts: the lock's and the timer's own loops try again (the SDK's default policy
    waits 16, 18, then 24 s between tries, so a storage outage held a renewal or an acquire for
    about a minute)."""
    service = BlobServiceClient.from_connection_string(
        connection_string,
        retry_total=0,
        connection_timeout=_CONNECT_SECONDS,
        read_timeout=_READ_SECONDS,
    )
    return service.get_container_client(HOSTS_CONTAINER)


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
        self._container = hosts_container(connection_string)
        self._blob: BlobClient = self._container.get_blob_client(f"locks/{lock_id}")
        self._lease: BlobLeaseClient | None = None
        # One lease id for this instance's every acquire: while its lease is active, storage
        # gives it back to the same id.
        self._lease_id = str(uuid.uuid4())
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
        lease = BlobLeaseClient(self._blob, lease_id=self._lease_id)
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
        self._stop.set()  # a renewer of an earlier hold that still retries stops
        self._stop = threading.Event()
        self._renewer = threading.Thread(
            target=self._renew, args=(self._stop,), name=f"lease {self.lock_id}", daemon=True
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
            except AzureError as error:  # expired and taken, or storage unreachable
                logger.debug("Releasing %s: %s", self.lock_id, error)

    def _renew(self, stop: threading.Event) -> None:
        wait = self.period * _RENEW_AT
        while not stop.wait(wait):
            with self._guard:
                lease = self._lease
            if lease is None:
                return
            started = time.monotonic()
            try:
                lease.renew()
            except Exception as error:
                status = getattr(error, "status_code", None)
                if status not in _LEASE_NOT_OURS and time.monotonic() < self._held_until:
                    logger.debug("Renewing %s failed, trying again: %s", self.lock_id, error)
                    wait = _RENEW_RETRY_SECONDS
                    continue
                logger.warning("Singleton lock lost (%s): %s", self.lock_id, error)
                with self._guard:
                    if self._lease is lease:
                        self._lease = None
                return
            with self._guard:
                self._held_until = started + self.period
            wait = self.period * _RENEW_AT

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
