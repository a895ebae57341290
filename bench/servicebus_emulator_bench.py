"""The project's Service Bus emulator under the SDK: throughput, and whose CPU it costs.

Three phases through the unmodified azure-servicebus SDK (sync client, one process):
batched send, receive + complete (peek-lock, each completion awaited), and sessions
(S sessions x M messages: one next-available session receiver at a time, then C async
next-available receivers at once). For each phase it
reports msgs/s, the emulator's CPU time per message (utime + stime of the emulator subprocess,
from /proc/<pid>/stat) and the client's (time.process_time() of this process).

Run: ``.venv/bin/python -m bench.servicebus_emulator_bench`` (``--messages N --batch B
--sessions S --per-session M --concurrency C``). The goal: the emulator is never the
bottleneck, i.e. its CPU per message is at most half the client's in every phase.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from azure.servicebus import (
    NEXT_AVAILABLE_SESSION,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiver,
    ServiceBusSender,
)
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.exceptions import OperationTimeoutError

from bench.proc import load_average, machine_line
from servicebus_emulator.testing import run_emulator

QUEUE = "bench"
SESSION_QUEUE = "bench-sessions"
GOAL = 0.5  # emulator CPU per message / client CPU per message, at most
BODY = b'{"sku": "SKU-0000001", "name": "Mug", "price": "9.50", "currency": "EUR"}'
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def config() -> dict[str, Any]:
    def queue(name: str, *, sessions: bool) -> dict[str, Any]:
        return {
            "Name": name,
            "Properties": {
                "RequiresSession": sessions,
                "LockDuration": "PT1M",
                "MaxDeliveryCount": 10,
                "DefaultMessageTimeToLive": "PT1H",
                "DeadLetteringOnMessageExpiration": False,
                "RequiresDuplicateDetection": False,
            },
        }

    return {
        "UserConfig": {
            "Namespaces": [
                {
                    "Name": "sbemulatorns",
                    "Queues": [queue(QUEUE, sessions=False), queue(SESSION_QUEUE, sessions=True)],
                    "Topics": [],
                }
            ],
            "Logging": {"Type": "File"},
        }
    }


def process_cpu_seconds(pid: int) -> tuple[float, float]:
    """(utime, stime) of a process in seconds, from /proc/<pid>/stat (fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as stat:
        # The command name (field 2) may hold spaces; everything after its ")" is fixed.
        fields = stat.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


@dataclass
class Phase:
    name: str
    messages: int
    seconds: float
    client_cpu: float
    emulator_user: float
    emulator_system: float

    @property
    def emulator_cpu(self) -> float:
        return self.emulator_user + self.emulator_system

    @property
    def per_second(self) -> float:
        return self.messages / self.seconds

    @property
    def client_us(self) -> float:
        return self.client_cpu / self.messages * 1e6

    @property
    def emulator_us(self) -> float:
        return self.emulator_cpu / self.messages * 1e6

    @property
    def ratio(self) -> float:
        return self.emulator_cpu / self.client_cpu


def measure(name: str, emulator_pid: int, work: Callable[[], int]) -> Phase:
    (user_before, system_before), client_before = (
        process_cpu_seconds(emulator_pid),
        time.process_time(),
    )
    started = time.perf_counter()
    messages = work()
    seconds = time.perf_counter() - started
    client_cpu = time.process_time() - client_before
    user_after, system_after = process_cpu_seconds(emulator_pid)
    return Phase(
        name,
        messages,
        seconds,
        client_cpu=client_cpu,
        emulator_user=user_after - user_before,
        emulator_system=system_after - system_before,
    )


def send_batches(sender: ServiceBusSender, total: int, batch: int) -> int:
    for start in range(0, total, batch):
        count = min(batch, total - start)
        sender.send_messages([ServiceBusMessage(BODY) for _ in range(count)])
    return total


def receive_and_complete(receiver: ServiceBusReceiver, total: int, batch: int) -> int:
    done = 0
    while done < total:
        messages = receiver.receive_messages(max_message_count=batch, max_wait_time=5)
        if not messages:
            raise RuntimeError(f"only {done} of {total} messages came back")
        for message in messages:
            receiver.complete_message(message)
        done += len(messages)
    return done


def send_sessions(sender: ServiceBusSender, sessions: int, per_session: int) -> int:
    for s in range(sessions):
        session_id = f"bench-{s:04d}"
        sender.send_messages(
            [ServiceBusMessage(BODY, session_id=session_id) for _ in range(per_session)]
        )
    return sessions * per_session


def drain_sessions(client: ServiceBusClient, sessions: int, per_session: int) -> int:
    """Next-available session receivers, one session after another, FIFO within each."""
    done = 0
    for _ in range(sessions):
        try:
            receiver = client.get_queue_receiver(
                SESSION_QUEUE, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=5
            )
            with receiver:
                left = per_session
                while left:
                    messages = receiver.receive_messages(max_message_count=left, max_wait_time=5)
                    if not messages:
                        raise RuntimeError(f"session {receiver.session.session_id} ran dry")
                    for message in messages:
                        receiver.complete_message(message)
                    left -= len(messages)
                    done += len(messages)
        except OperationTimeoutError as error:
            raise RuntimeError(f"only {done} session messages came back") from error
    return done


def drain_sessions_concurrently(
    connection_string: str, sessions: int, per_session: int, concurrency: int
) -> int:
    """``concurrency`` async next-available session receivers at once, as a Functions host
    with maxConcurrentSessions does; each takes a session, drains it and takes the next."""
    total = sessions * per_session

    async def run() -> int:
        done = 0
        all_done = asyncio.Event()

        async def worker(client: AsyncServiceBusClient) -> None:
            nonlocal done
            while True:
                async with client.get_queue_receiver(
                    SESSION_QUEUE, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=5
                ) as receiver:
                    left = per_session
                    while left:
                        messages = await receiver.receive_messages(
                            max_message_count=left, max_wait_time=5
                        )
                        if not messages:
                            raise RuntimeError(f"session {receiver.session.session_id} ran dry")
                        for message in messages:
                            await receiver.complete_message(message)
                        left -= len(messages)
                        done += len(messages)
                if done >= total:
                    all_done.set()

        async with AsyncServiceBusClient.from_connection_string(connection_string) as client:
            workers = [asyncio.create_task(worker(client)) for _ in range(concurrency)]
            finished = asyncio.create_task(all_done.wait())
            await asyncio.wait([finished, *workers], return_when=asyncio.FIRST_COMPLETED)
            for task in workers:
                task.cancel()  # the others wait for a session that will not come
            results = await asyncio.gather(*workers, return_exceptions=True)
            failures = [r for r in results if not isinstance(r, asyncio.CancelledError | None)]
            if failures:
                raise failures[0]
        return done

    return asyncio.run(run())


def table(phases: list[Phase]) -> str:
    """The phases as bench/README.md shows them."""
    rows = [
        "| phase | msgs | msgs/s | client µs/msg | emulator µs/msg (kernel) | emulator / client |",
        "|---|---|---|---|---|---|",
    ]
    for p in phases:
        kernel = p.emulator_system / p.messages * 1e6
        rows.append(
            f"| {p.name} | {p.messages:,} | {p.per_second:,.0f} | {p.client_us:.0f} "
            f"| {p.emulator_us:.0f} ({kernel:.0f}) | {p.ratio:.2f} |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--per-session", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    load_before = load_average()

    # Senders and the plain receiver are opened before their phase: opening and closing a
    # handler costs the SDK about 1 s of polling, whatever the broker. Session receivers are
    # part of session throughput, so those phases open one per session.
    with (
        run_emulator(config()) as emu,
        ServiceBusClient.from_connection_string(emu.connection_string) as client,
        client.get_queue_sender(QUEUE) as sender,
        client.get_queue_receiver(QUEUE, max_wait_time=5) as receiver,
        client.get_queue_sender(SESSION_QUEUE) as session_sender,
    ):
        pid = emu.pid
        phases = [
            measure(
                f"send (batches of {args.batch})",
                pid,
                lambda: send_batches(sender, args.messages, args.batch),
            ),
            measure(
                "receive + complete",
                pid,
                lambda: receive_and_complete(receiver, args.messages, args.batch),
            ),
            measure(
                f"sessions: send {args.sessions}x{args.per_session}",
                pid,
                lambda: send_sessions(session_sender, args.sessions, args.per_session),
            ),
            measure(
                "sessions: receive + complete",
                pid,
                lambda: drain_sessions(client, args.sessions, args.per_session),
            ),
        ]
        send_sessions(session_sender, args.sessions, args.per_session)
        phases.append(
            measure(
                f"sessions: {args.concurrency} async receivers",
                pid,
                lambda: drain_sessions_concurrently(
                    emu.connection_string, args.sessions, args.per_session, args.concurrency
                ),
            )
        )
        counts = emu.counts()
    assert counts[QUEUE]["active"] == 0 and counts[SESSION_QUEUE]["active"] == 0, counts

    print(machine_line(load_before, load_average()) + "\n")
    print(table(phases))
    worst = max(phases, key=lambda p: p.ratio)
    if worst.ratio <= GOAL:
        verdict = (
            f"goal met: the emulator's CPU per message is at most {worst.ratio:.2f}x the "
            f"client's (worst phase: {worst.name}; goal <= {GOAL}x), so the SDK client, not "
            "the emulator, bounds throughput."
        )
    else:
        verdict = (
            f"goal NOT met: in '{worst.name}' the emulator spends {worst.ratio:.2f}x the "
            f"client's CPU per message (goal <= {GOAL}x)."
        )
    print(f"\nverdict: {verdict}")


if __name__ == "__main__":
    main()
