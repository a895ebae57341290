"""Faults, on the project's emulator only: kill -9 and restart with --data-dir, a client that
vanishes holding a lock, receivers racing for one session, garbage on the port.

Each test starts an emulator of its own, so a fault cannot leak into the conformance runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.exceptions import SessionCannotBeLockedError
from azure.servicebus.management import ServiceBusAdministrationClient, SqlRuleFilter

import raw_amqp
from servicebus_emulator.testing import run_emulator

pytestmark = pytest.mark.integration

LOCK_SECONDS = 3


def wait_for(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll until ``condition()`` is truthy and return it; fail naming ``what`` after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)
    return value


MAX_DELIVERY_COUNT = 2  # of the faults-max-2 queue


def config() -> dict[str, Any]:
    def queue(
        name: str, *, sessions: bool = False, duplicates: bool = False, max_delivery: int = 10
    ) -> dict[str, Any]:
        return {
            "Name": name,
            "Properties": {
                "RequiresSession": sessions,
                "LockDuration": f"PT{LOCK_SECONDS}S",
                "MaxDeliveryCount": max_delivery,
                "DefaultMessageTimeToLive": "PT1H",
                "DeadLetteringOnMessageExpiration": False,
                "RequiresDuplicateDetection": duplicates,
                "DuplicateDetectionHistoryTimeWindow": "PT10M",
            },
        }

    return {
        "UserConfig": {
            "Namespaces": [
                {
                    "Name": "sbemulatorns",
                    "Queues": [
                        queue("faults"),
                        queue("faults-sessions", sessions=True),
                        queue("faults-duplicates", duplicates=True),
                        queue("faults-max-2", max_delivery=MAX_DELIVERY_COUNT),
                    ],
                    "Topics": [
                        {
                            "Name": "faults-topic",
                            "Properties": {"DefaultMessageTimeToLive": "PT1H"},
                            "Subscriptions": [
                                {"Name": name, "Properties": queue(name)["Properties"]}
                                for name in ("first", "second")
                            ],
                        }
                    ],
                }
            ],
            "Logging": {"Type": "Console"},
        }
    }


@pytest.fixture
def emulator() -> Iterator[Any]:
    with run_emulator(config()) as emu:
        yield emu


def client(connection_string: str) -> ServiceBusClient:
    return ServiceBusClient.from_connection_string(connection_string, retry_total=0)


def send(connection_string: str, queue: str, messages: Any) -> None:
    """One send to a queue, on a connection of its own."""
    with client(connection_string) as sb, sb.get_queue_sender(queue) as sender:
        sender.send_messages(messages)


def receive_all(connection_string: str, queue: str, *, quiet_for: float = 2.0) -> list[Any]:
    """Receive-and-delete until the queue has been empty for ``quiet_for`` seconds."""
    found: list[Any] = []
    with (
        client(connection_string) as sb,
        sb.get_queue_receiver(
            queue, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
        ) as receiver,
    ):
        while batch := receiver.receive_messages(max_message_count=100, max_wait_time=quiet_for):
            found.extend(batch)
    return found


# --- kill -9 and restart ------------------------------------------------------------------


def test_everything_acknowledged_survives_kill_and_restart(tmp_path: Path) -> None:
    with run_emulator(config(), data_dir=tmp_path) as emu:
        with client(emu.connection_string) as sb:
            with sb.get_queue_sender("faults") as sender:
                sender.send_messages(
                    [ServiceBusMessage(f"m{n}", message_id=f"m{n}") for n in range(10)]
                )
                far = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
                (scheduled,) = sender.schedule_messages(ServiceBusMessage("later"), far)
            with sb.get_queue_receiver("faults", max_wait_time=2) as receiver:
                received: list[Any] = []
                for _ in range(10):
                    received += receiver.receive_messages(max_message_count=10, max_wait_time=2)
                    if len(received) >= 10:
                        break
                by_id = {str(m.message_id): m for m in received}
                for n in (0, 1, 2):
                    receiver.complete_message(by_id[f"m{n}"])
                for n in (3, 4):
                    receiver.dead_letter_message(
                        by_id[f"m{n}"], reason="Bad", error_description="m"
                    )
                receiver.defer_message(by_id["m5"])
                deferred = by_id["m5"].sequence_number
                # m6..m9 stay locked, never settled: the kill must not lose them.
            with sb.get_queue_sender("faults-sessions") as sender:
                sender.send_messages(ServiceBusMessage("s", session_id="durable-session"))
            with sb.get_queue_receiver("faults-sessions", session_id="durable-session") as r:
                r.session.set_state(b"step-2")

        emu.kill()
        emu.restart()

        counts = emu.counts()
        assert counts["faults"]["active"] == 4
        assert counts["faults"]["dead_lettered"] == 2
        assert counts["faults"]["deferred"] == 1
        assert counts["faults"]["scheduled"] == 1
        with client(emu.connection_string) as sb:
            with sb.get_queue_receiver("faults", max_wait_time=1) as receiver:
                peeked = receiver.peek_messages(max_message_count=50, sequence_number=0)
                assert scheduled in [m.sequence_number for m in peeked]
                (back,) = receiver.receive_deferred_messages([deferred])
                assert str(back.message_id) == "m5"
                receiver.complete_message(back)
            with sb.get_queue_receiver(
                "faults", sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=2
            ) as dead:
                letters = dead.receive_messages(max_message_count=10, max_wait_time=2)
                assert sorted(str(m.message_id) for m in letters) == ["m3", "m4"]
                assert {m.dead_letter_reason for m in letters} == {"Bad"}
            with sb.get_queue_receiver("faults-sessions", session_id="durable-session") as r:
                assert r.session.get_state() == b"step-2"
                assert [b"".join(m.body) for m in r.receive_messages(max_wait_time=2)] == [b"s"]
        # Locks do not outlive the process that granted them: at the latest after the lock
        # duration, the unsettled messages are deliverable again.
        remaining = receive_all(emu.connection_string, "faults", quiet_for=LOCK_SECONDS + 1)
        assert sorted(str(m.message_id) for m in remaining) == ["m6", "m7", "m8", "m9"]


def test_a_kill_in_mid_stream_loses_no_acknowledged_message(tmp_path: Path) -> None:
    """A sender and a receiver are busy when the emulator gets SIGKILL. Every message whose
    send returned is there after the restart, unless its completion returned too."""
    acknowledged: list[str] = []
    completed: set[str] = set()
    completing: set[str] = set()  # completion sent, outcome unknown when the kill came
    stop = threading.Event()

    def send_until_stopped(connection_string: str) -> None:
        with client(connection_string) as sb, sb.get_queue_sender("faults") as sender:
            n = 0
            while not stop.is_set():
                message_id = f"stream-{n}"
                try:
                    sender.send_messages(ServiceBusMessage(message_id, message_id=message_id))
                except Exception:
                    return  # the kill: this send is unacknowledged
                acknowledged.append(message_id)
                n += 1

    killed = False
    with run_emulator(config(), data_dir=tmp_path) as emu:
        sender = threading.Thread(target=send_until_stopped, args=(emu.connection_string,))
        sender.start()
        try:
            with client(emu.connection_string) as sb, sb.get_queue_receiver("faults") as receiver:
                deadline = time.monotonic() + 60
                while len(acknowledged) < 150 and time.monotonic() < deadline:
                    for message in receiver.receive_messages(max_message_count=10, max_wait_time=1):
                        if (message.sequence_number or 0) % 3:  # every third one stays locked
                            completing.add(str(message.message_id))
                            receiver.complete_message(message)
                            completed.add(str(message.message_id))
                emu.kill()
                killed = True
        except Exception:
            if not killed:
                raise
            # else: the receiver's connection died with the emulator, as it should
        finally:
            stop.set()
            sender.join(timeout=30)
        assert len(acknowledged) >= 150

        emu.restart()
        found = [
            str(m.message_id)
            for m in receive_all(emu.connection_string, "faults", quiet_for=LOCK_SECONDS + 1)
        ]

    assert len(found) == len(set(found)), "a message came back twice"
    assert not set(found) & completed, "a completed message came back"
    lost = set(acknowledged) - completing - set(found)
    assert not lost, f"acknowledged messages lost: {sorted(lost)[:10]}"
    assert set(found) <= set(acknowledged) | {f"stream-{len(acknowledged)}"}


def test_sequence_numbers_and_duplicate_history_survive_kill_and_restart(tmp_path: Path) -> None:
    with run_emulator(config(), data_dir=tmp_path) as emu:
        send(
            emu.connection_string,
            "faults-duplicates",
            [ServiceBusMessage("before", message_id=f"d{n}") for n in range(3)],
        )
        before = receive_all(emu.connection_string, "faults-duplicates", quiet_for=1)

        emu.kill()
        emu.restart()

        with client(emu.connection_string) as sb, sb.get_queue_sender("faults-duplicates") as s:
            s.send_messages(ServiceBusMessage("again", message_id="d1"))  # a duplicate
            s.send_messages(ServiceBusMessage("after", message_id="d3"))
        after = receive_all(emu.connection_string, "faults-duplicates", quiet_for=1)

    assert [str(m.message_id) for m in before] == ["d0", "d1", "d2"]
    assert [str(m.message_id) for m in after] == ["d3"]
    assert after[0].sequence_number > max(m.sequence_number for m in before)


def test_subscriptions_and_a_topic_s_scheduled_messages_survive_kill_and_restart(
    tmp_path: Path,
) -> None:
    with run_emulator(config(), data_dir=tmp_path) as emu:
        with client(emu.connection_string) as sb, sb.get_topic_sender("faults-topic") as sender:
            sender.send_messages(ServiceBusMessage("fanned", message_id="fanned"))
            later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
            (scheduled,) = sender.schedule_messages(ServiceBusMessage("later"), later)

        held = kill_while_locked(emu, "faults-topic/Subscriptions/first")

        assert held[1] == 0
        assert emu.counts()["faults-topic"]["scheduled"] == 1
        with client(emu.connection_string) as sb:
            for name, expected in (("first", 1), ("second", 0)):
                with sb.get_subscription_receiver("faults-topic", name) as receiver:
                    (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
                    assert (str(message.message_id), message.delivery_count) == (
                        "fanned",
                        expected,
                    )
                    receiver.complete_message(message)
            with sb.get_topic_sender("faults-topic") as sender:
                sender.cancel_scheduled_messages(scheduled)
        assert emu.counts()["faults-topic"]["scheduled"] == 0


def administration(emu: Any) -> ServiceBusAdministrationClient:
    """With the override Microsoft's emulator documentation gives for Python."""
    admin = ServiceBusAdministrationClient.from_connection_string(
        f"Endpoint=sb://{emu.host}:{emu.http_port};SharedAccessKeyName=RootManageSharedAccessKey;"
        "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"
    )
    admin._impl._client._base_url = emu.http_url
    return admin


def test_what_the_management_api_changed_survives_kill_and_restart(tmp_path: Path) -> None:
    with run_emulator(config(), data_dir=tmp_path) as emu:
        with administration(emu) as admin:
            admin.create_queue("made-at-run-time", max_delivery_count=3)
            admin.create_topic("topic-at-run-time")
            admin.create_subscription("topic-at-run-time", "picky")
            admin.delete_rule("topic-at-run-time", "picky", "$Default")
            admin.create_rule(
                "topic-at-run-time", "picky", "red", filter=SqlRuleFilter("color = 'red'")
            )
            admin.update_queue(admin.get_queue("faults-duplicates"))  # an update, in place
            admin.delete_queue("faults-max-2")  # a queue of the config file
            admin.delete_subscription("faults-topic", "second")
        send(
            emu.connection_string, "made-at-run-time", ServiceBusMessage("kept", message_id="kept")
        )

        emu.kill()
        emu.restart()

        with administration(emu) as admin:
            assert admin.get_queue("made-at-run-time").max_delivery_count == 3
            assert [r.name for r in admin.list_rules("topic-at-run-time", "picky")] == ["red"]
            assert [s.name for s in admin.list_subscriptions("faults-topic")] == ["first"]
            names = [q.name for q in admin.list_queues()]
            assert "faults-max-2" not in names and "faults-duplicates" in names
        (message,) = receive_all(emu.connection_string, "made-at-run-time", quiet_for=1)
        assert str(message.message_id) == "kept"


# --- a client that vanishes ---------------------------------------------------------------

LOCK_HOLDER = textwrap.dedent(
    """
    import sys, time
    from azure.servicebus import ServiceBusClient
    connection_string, entity, session_id = sys.argv[1], sys.argv[2], sys.argv[3] or None
    options = {"session_id": session_id, "max_wait_time": 10}
    with ServiceBusClient.from_connection_string(connection_string, retry_total=0) as sb:
        if "/Subscriptions/" in entity:  # topic/Subscriptions/name
            topic, _, name = entity.split("/")
            receiver = sb.get_subscription_receiver(topic, name, **options)
        else:
            receiver = sb.get_queue_receiver(entity, **options)
        with receiver:
            (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=10)
            until = message.locked_until_utc  # None under a session lock
            until_ms = round(until.timestamp() * 1000) if until else 0
            print(message.sequence_number, message.delivery_count, until_ms, flush=True)
            time.sleep(600)
    """
)


class Held(NamedTuple):
    sequence_number: int
    delivery_count: int
    locked_until: datetime.datetime | None  # the message's own lock; None under a session's


@contextlib.contextmanager
def holding_a_lock(connection_string: str, entity: str, session_id: str = "") -> Iterator[Held]:
    """A client in another process that received one message of ``entity`` (a queue, or
    ``topic/Subscriptions/name``) under a peek lock (its own, or its session's) and holds it
    without settling: yields what it received, then SIGKILLs the client (no detach, no close:
    the socket just goes away)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, connection_string, entity, session_id],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        sequence_number, delivery_count, until_ms = map(int, holder.stdout.readline().split())
        locked_until = (
            datetime.datetime.fromtimestamp(until_ms / 1000, datetime.UTC) if until_ms else None
        )
        yield Held(sequence_number, delivery_count, locked_until)
    finally:
        holder.kill()
        holder.wait()


def test_a_vanished_client_s_message_comes_back_after_the_lock_duration(emulator: Any) -> None:
    send(emulator.connection_string, "faults", ServiceBusMessage("held"))

    with holding_a_lock(emulator.connection_string, "faults") as held:
        pass

    with client(emulator.connection_string) as sb, sb.get_queue_receiver("faults") as receiver:
        again = receiver.receive_messages(max_message_count=1, max_wait_time=LOCK_SECONDS + 5)
        assert len(again) == 1
        # Delivered again only once the dead client's lock ran out (by the broker's own lock
        # times, not the test's clock), as a failed delivery.
        assert held.locked_until is not None and again[0].locked_until_utc is not None
        relocked_at = again[0].locked_until_utc - datetime.timedelta(seconds=LOCK_SECONDS)
        whole_ms = datetime.timedelta(milliseconds=1)  # the broker's times are whole ms
        assert relocked_at >= held.locked_until - whole_ms, "the vanished client's lock ended early"
        assert again[0].sequence_number == held.sequence_number
        assert again[0].delivery_count == 1
        receiver.complete_message(again[0])


# --- a kill -9 while a message is locked ----------------------------------------------------


def kill_while_locked(emu: Any, entity: str, session_id: str = "") -> tuple[int, int]:
    """SIGKILL the emulator while a client holds one message of ``entity`` under a lock, then
    restart it (same --data-dir); (sequence number, delivery count) as the client got it."""
    with holding_a_lock(emu.connection_string, entity, session_id) as held:
        emu.kill()
    emu.restart()
    return held.sequence_number, held.delivery_count


def test_a_message_locked_at_a_kill_is_redelivered_with_its_delivery_counted(
    tmp_path: Path,
) -> None:
    """A restart ends the lock as a lock expiry would: the interrupted delivery counts."""
    with run_emulator(config(), data_dir=tmp_path) as emu:
        send(
            emu.connection_string,
            "faults",
            ServiceBusMessage("held at the kill", message_id="held"),
        )

        sequence_number, first_count = kill_while_locked(emu, "faults")

        with client(emu.connection_string) as sb, sb.get_queue_receiver("faults") as receiver:
            (again,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            assert again.sequence_number == sequence_number
            assert (first_count, again.delivery_count) == (0, 1)
            receiver.complete_message(again)


def test_a_message_locked_at_each_kill_is_dead_lettered_at_max_delivery_count(
    tmp_path: Path,
) -> None:
    with run_emulator(config(), data_dir=tmp_path) as emu:
        send(
            emu.connection_string,
            "faults-max-2",
            ServiceBusMessage("held twice", message_id="twice"),
        )

        counts = [kill_while_locked(emu, "faults-max-2")[1] for _ in range(MAX_DELIVERY_COUNT)]

        assert counts == [0, 1]
        assert emu.counts()["faults-max-2"]["active"] == 0
        with (
            client(emu.connection_string) as sb,
            sb.get_queue_receiver("faults-max-2", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dead,
        ):
            (letter,) = dead.receive_messages(max_message_count=1, max_wait_time=5)
            assert str(letter.message_id) == "twice"
            assert letter.dead_letter_reason == "MaxDeliveryCountExceeded"
            assert letter.delivery_count == MAX_DELIVERY_COUNT
            dead.complete_message(letter)


def test_a_message_of_a_session_locked_at_a_kill_is_redelivered_with_its_delivery_counted(
    tmp_path: Path,
) -> None:
    session = "held-session"
    with run_emulator(config(), data_dir=tmp_path) as emu:
        send(
            emu.connection_string,
            "faults-sessions",
            [ServiceBusMessage(f"s{n}", session_id=session) for n in range(2)],
        )

        sequence_number, first_count = kill_while_locked(emu, "faults-sessions", session)

        with (
            client(emu.connection_string) as sb,
            sb.get_queue_receiver("faults-sessions", session_id=session) as receiver,
        ):
            received = receiver.receive_messages(max_message_count=2, max_wait_time=5)
            assert [m.sequence_number for m in received][:1] == [sequence_number]
            assert (first_count, received[0].delivery_count) == (0, 1)
            assert [m.delivery_count for m in received[1:]] == [0]  # never delivered
            for message in received:
                receiver.complete_message(message)


# --- receivers racing for one session -----------------------------------------------------


def test_receivers_racing_for_one_session_one_wins(emulator: Any) -> None:
    contenders = 6

    async def race(session: str) -> list[str]:
        start = asyncio.Event()

        async def contend() -> str:
            async with AsyncServiceBusClient.from_connection_string(
                emulator.connection_string, retry_total=0
            ) as sb:
                await start.wait()
                try:
                    async with sb.get_queue_receiver("faults-sessions", session_id=session) as r:
                        assert r.session.session_id == session
                        await asyncio.sleep(2)  # hold it while the others try
                        return "locked"
                except SessionCannotBeLockedError:
                    return "refused"

        tasks = [asyncio.create_task(contend()) for _ in range(contenders)]
        await asyncio.sleep(0.2)
        start.set()
        return await asyncio.gather(*tasks)

    for round_ in range(3):
        outcomes = asyncio.run(race(f"race-{round_}-{uuid.uuid4().hex[:6]}"))
        assert sorted(outcomes) == ["locked"] + ["refused"] * (contenders - 1)


def test_a_sync_and_an_async_receiver_racing_for_one_session(emulator: Any) -> None:
    session = f"race-mixed-{uuid.uuid4().hex[:6]}"
    outcomes: list[str] = []
    start = threading.Barrier(2)

    def sync_contender() -> None:
        with client(emulator.connection_string) as sb:
            start.wait()
            try:
                with sb.get_queue_receiver("faults-sessions", session_id=session):
                    time.sleep(1)
                    outcomes.append("locked")
            except SessionCannotBeLockedError:
                outcomes.append("refused")

    async def async_contender() -> None:
        async with AsyncServiceBusClient.from_connection_string(
            emulator.connection_string, retry_total=0
        ) as sb:
            await asyncio.to_thread(start.wait)
            try:
                async with sb.get_queue_receiver("faults-sessions", session_id=session):
                    await asyncio.sleep(1)
                    outcomes.append("locked")
            except SessionCannotBeLockedError:
                outcomes.append("refused")

    thread = threading.Thread(target=sync_contender)
    thread.start()
    asyncio.run(async_contender())
    thread.join(timeout=30)
    assert sorted(outcomes) == ["locked", "refused"]


# --- garbage on the port ------------------------------------------------------------------

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_HEADER = b"AMQP\x03\x01\x00\x00"

GARBAGE = {
    "random bytes": os.urandom(4096),
    "http": b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
    "a frame after the amqp header": AMQP_HEADER
    + b"\x00\x00\x00\x10\x02\x00\x00\x00"
    + b"\xff" * 8,
    "a 4 GiB frame size": SASL_HEADER + b"\xff\xff\xff\xff\x02\x01\x00\x00",
    "a frame shorter than its header": AMQP_HEADER + b"\x00\x00\x00\x04\x02\x00\x00\x00",
    "an undecodable performative": AMQP_HEADER
    + b"\x00\x00\x00\x0f\x02\x00\x00\x00\x00\x53\x10\xc0\x7f\xff\xff",
}


def closed_by_server(sock: socket.socket, timeout: float) -> bool:
    """Whether the server closes this socket within ``timeout`` (what it sends first is fine)."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False
    return False


def test_garbage_on_the_port_does_not_disturb_other_connections(emulator: Any) -> None:
    errors: list[BaseException] = []
    round_trips = 0
    stop = threading.Event()

    def busy_client() -> None:
        nonlocal round_trips
        try:
            with (
                client(emulator.connection_string) as sb,
                sb.get_queue_sender("faults") as sender,
                sb.get_queue_receiver("faults", max_wait_time=5) as receiver,
            ):
                while not stop.is_set():
                    sender.send_messages(ServiceBusMessage(f"rt-{round_trips}"))
                    (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
                    assert b"".join(message.body) == f"rt-{round_trips}".encode()
                    receiver.complete_message(message)
                    round_trips += 1
        except BaseException as error:
            errors.append(error)

    worker = threading.Thread(target=busy_client)
    worker.start()
    try:
        # The client's connections are open and working before the garbage comes: opening a
        # sender and a receiver takes the SDK a second or two, more on a busy machine.
        wait_for(
            lambda: errors or round_trips > 0, timeout=60, what="the client's first round trip"
        )
        # Half-open connections: one that never says anything, one that stops mid-header.
        silent = socket.create_connection((emulator.host, emulator.port))
        stalled = socket.create_connection((emulator.host, emulator.port))
        stalled.sendall(SASL_HEADER[:4])
        before = round_trips
        for name, payload in GARBAGE.items():
            with socket.create_connection((emulator.host, emulator.port)) as sock:
                sock.sendall(payload)
                assert closed_by_server(sock, timeout=5), f"{name}: the socket was left hanging"
        # Its connections went on working through it: more round trips on them, no error.
        wait_for(
            lambda: errors or round_trips > before,
            timeout=30,
            what="the SDK client's progress after the garbage",
        )
        assert not errors, errors
    finally:
        stop.set()
        worker.join(timeout=30)
    assert not errors, errors
    silent.close()
    stalled.close()

    # A fresh client after all that.
    with client(emulator.connection_string) as sb:
        with sb.get_queue_sender("faults") as sender:
            sender.send_messages(ServiceBusMessage("after"))
        with sb.get_queue_receiver("faults", max_wait_time=5) as receiver:
            (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            assert b"".join(message.body) == b"after"
            receiver.complete_message(message)


# --- hostile requests on the HTTP port ------------------------------------------------------


def http_exchange(emu: Any, request: bytes) -> bytes:
    """Send raw bytes to the HTTP port; what comes back before the server closes."""
    with socket.create_connection((emu.host, emu.http_port), timeout=10) as sock:
        sock.sendall(request)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
        return reply


HOSTILE_HTTP = {
    "a malformed request line": (b"NONSENSE\r\n\r\n", b"400"),
    "a body declared over 1 MiB": (
        b"PUT /q HTTP/1.1\r\nContent-Length: 2097152\r\nConnection: close\r\n\r\n",
        b"413",
    ),
    "a malformed Content-Length": (
        b"PUT /q HTTP/1.1\r\nContent-Length: -1\r\nConnection: close\r\n\r\n",
        b"400",
    ),
    "a body that is not XML": (
        b"PUT /q HTTP/1.1\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
        b"400",
    ),
    "an unknown operation": (
        b"POST /a/b/c/d/e/f HTTP/1.1\r\nConnection: close\r\n\r\n",
        b"404",
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_HTTP))
def test_a_hostile_http_request_gets_an_error_before_any_change(emulator: Any, name: str) -> None:
    request, status = HOSTILE_HTTP[name]
    reply = http_exchange(emulator, request)
    assert reply.startswith(b"HTTP/1.1 " + status), reply[:200]
    assert "q" not in emulator.counts()
    assert emulator.healthy()


# --- connection hygiene ---------------------------------------------------------------------


def test_the_open_advertises_an_idle_time_out(emulator: Any) -> None:
    sock, fields = raw_amqp.open_connection_with_fields(emulator.host, emulator.port)
    with sock:
        assert fields[4] == 240_000  # ms; the SDKs send empty frames well within it


def test_a_connection_silent_past_the_idle_time_out_is_closed() -> None:
    with run_emulator(config(), idle_timeout=2) as emu:
        silent, fields = raw_amqp.open_connection_with_fields(emu.host, emu.port)
        talking, _ = raw_amqp.open_connection_with_fields(emu.host, emu.port)
        assert fields[4] == 2000
        with silent, talking:
            opened = time.monotonic()
            talking.settimeout(0.3)
            while time.monotonic() - opened < 5:  # empty frames keep this one open
                talking.sendall(raw_amqp.frame(b""))
                with contextlib.suppress(TimeoutError):
                    talking.recv(65536)
            replies = []
            while (incoming := raw_amqp.read_frame(silent)) is not None:
                replies.append(incoming[2])
            assert replies and raw_amqp.code_of(replies[-1]) == raw_amqp.CLOSE
            assert b"amqp:resource-limit-exceeded" in replies[-1]
            talking.sendall(raw_amqp.frame(b""))
            assert emu.health()["connections"] == 1  # the talking one


def open_file_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_thousands_of_connections_opened_and_dropped(emulator: Any) -> None:
    """2,000 connections: half go through SASL and open, half stop in the handshake; every
    one is dropped without a close. The emulator forgets them all and serves on."""
    before = open_file_descriptors(emulator.pid)

    async def churn(n: int, limit: asyncio.Semaphore) -> None:
        async with limit:
            reader, writer = await asyncio.open_connection(emulator.host, emulator.port)
            if n % 2:
                writer.write(raw_amqp.handshake_until_open())
                await writer.drain()
                await reader.readexactly(8)  # the SASL header back; the rest may follow
            else:
                writer.write(raw_amqp.SASL_HEADER[:5])
            writer.transport.abort()  # dropped, no close

    async def all_of_them() -> None:
        limit = asyncio.Semaphore(100)
        await asyncio.gather(*(churn(n, limit) for n in range(2000)))

    asyncio.run(all_of_them())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and emulator.health()["connections"] > 0:
        time.sleep(0.2)
    assert emulator.health()["connections"] == 0
    assert open_file_descriptors(emulator.pid) <= before + 5
    with client(emulator.connection_string) as sb:
        with sb.get_queue_sender("faults") as sender:
            sender.send_messages(ServiceBusMessage("after the churn"))
        assert [b"".join(m.body) for m in receive_all(emulator.connection_string, "faults")] == [
            b"after the churn"
        ]


# --- protocol: heartbeats and malformed frames on an open connection -----------------------


def test_heartbeats_keep_a_connection_with_an_idle_timeout_alive(emulator: Any) -> None:
    """A client that asks for a 1 s idle timeout gets empty frames, and the connection stays
    open while it says nothing. The emulator beats every half idle timeout (0.5 s), so in 3 s
    about 6 frames are sent; the test asks for at least one per idle timeout (3), a slack of
    half for a busy machine. It counts frames rather than timing their arrival: the frames
    wait in the socket for a reader the machine made late, so its delays do not count."""
    idle_timeout = 1.0
    window = 3.0
    sock = raw_amqp.open_connection(
        emulator.host, emulator.port, idle_timeout_ms=int(idle_timeout * 1000)
    )
    with sock:
        frames = 0
        started = time.monotonic()
        while time.monotonic() - started < window:
            incoming = raw_amqp.read_frame(sock)
            assert incoming is not None, "the server closed an idle connection it must keep"
            frames += 1
    assert frames >= window / idle_timeout, frames


MALFORMED_AFTER_OPEN = {
    "an unknown performative": raw_amqp.frame(raw_amqp.performative(0x99)),
    "a truncated begin": raw_amqp.frame(b"\x00\x53\x11\xc0\x05\x04\x40"),
    "a transfer on a handle never attached": raw_amqp.frame(
        raw_amqp.performative(
            raw_amqp.BEGIN, raw_amqp.NULL, *[raw_amqp.uint(n) for n in (0, 9, 9)]
        ),
        channel=1,
    )
    + raw_amqp.frame(
        raw_amqp.performative(raw_amqp.TRANSFER, raw_amqp.uint(7), raw_amqp.uint(0)), channel=1
    ),
}


@pytest.mark.parametrize("name", sorted(MALFORMED_AFTER_OPEN))
def test_a_malformed_frame_closes_the_connection_with_an_amqp_error(
    emulator: Any, name: str
) -> None:
    sock = raw_amqp.open_connection(emulator.host, emulator.port)
    with sock:
        sock.sendall(MALFORMED_AFTER_OPEN[name])
        replies = []
        while (incoming := raw_amqp.read_frame(sock)) is not None:
            replies.append(incoming[2])
    # Whatever came first (a begin for the good frame), the last word is a close carrying an
    # error (descriptor 0x1d), then the socket is closed (read_frame returned None).
    assert replies and raw_amqp.code_of(replies[-1]) == raw_amqp.CLOSE
    assert b"\x00\x53\x1d" in replies[-1], replies[-1].hex()
    # The server goes on serving.
    send(emulator.connection_string, "faults", ServiceBusMessage("still here"))
