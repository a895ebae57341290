"""The listener singleton lock: a blob lease in AzureWebJobsStorage (Azurite here), held by
one instance of the app at a time, as the WebJobs SDK's SingletonManager holds it."""

from __future__ import annotations

from pathlib import Path

from azure.storage.blob import BlobLeaseClient, BlobServiceClient

from functions_local_host.singleton import (
    HOSTS_CONTAINER,
    ListenerLock,
    host_id,
    listener_lock_id,
)
from local_host_testing import wait_for


def test_one_instance_holds_a_listener_lock_until_it_lets_go(
    azurite_connection_string: str,
) -> None:
    lock_id = listener_lock_id("test-host", "archive_timer")
    first = ListenerLock(azurite_connection_string, lock_id, period=15)
    second = ListenerLock(azurite_connection_string, lock_id, period=15)
    try:
        assert first.acquire()
        assert not second.acquire()
        assert first.held and not second.held

        first.release()

        assert second.acquire()
        assert not first.acquire()
    finally:
        first.release()
        second.release()
    blob = (
        BlobServiceClient.from_connection_string(azurite_connection_string)
        .get_container_client(HOSTS_CONTAINER)
        .get_blob_client("locks/test-host/Host.Functions.archive_timer.Listener")
    )
    assert blob.get_blob_properties().lease.state == "available"


def test_instances_of_one_app_share_its_host_id(tmp_path: Path) -> None:
    script = tmp_path / "function_app.py"
    assert host_id({}, script) == host_id({}, tmp_path / "function_app.py")
    assert host_id({}, script) != host_id({}, tmp_path / "other" / "function_app.py")
    assert len(host_id({}, script)) <= 32
    assert host_id({"AzureFunctionsWebHost__hostid": "My-App"}, script) == "my-app"


def test_a_lock_whose_holder_died_is_taken_once_its_lease_runs_out(
    azurite_connection_string: str,
) -> None:
    lock_id = listener_lock_id("test-host", "died_timer")
    blob = (
        BlobServiceClient.from_connection_string(azurite_connection_string)
        .get_container_client(HOSTS_CONTAINER)
        .get_blob_client(f"locks/{lock_id}")
    )
    survivor = ListenerLock(azurite_connection_string, lock_id, period=15)
    try:
        assert survivor.acquire()  # creates the blob
        survivor.release()
        # an instance killed with SIGKILL: it took the lease and never renews nor releases it
        BlobLeaseClient(blob).acquire(lease_duration=15)

        assert not survivor.acquire()
        assert wait_for(
            survivor.acquire, timeout=40, what="the dead holder's lease to run out", interval=1.0
        )
    finally:
        survivor.release()
