"""Sessions through the local Functions host: how fast it takes the next session.

S sessions of M messages each are queued on the emulator before the host starts. The function
(``host_sessions_app.py``) does what the app's processor does with each message, through
``ServiceBusMessageActions`` (read the session state, write it, complete the message) and
releases the session after its last message. The host runs with ``maxConcurrentSessions`` 1,
then 8 (a fresh queue each time, same emulator, same run) and reports sessions/s and messages/s
from the first invocation to the last, and the median gap between one session's last invocation
and the next session's first on a slot (what the host spends between two sessions: release,
close, accept).

``--profile`` first times the phases of one session through the SDK alone, sync and async
(accept, receive, state get/set, complete, close), the floor under the host's per-session cost.

Run: ``.venv/bin/python -m bench.host_sessions_bench`` (``--sessions S --per-session M
--slots 1 8 --profile``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib
import itertools
import json
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusClient, ServiceBusMessage
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient

from bench.proc import load_average, machine_line
from bench.servicebus_emulator_bench import process_cpu_seconds
from functions_local_host import LocalHost
from servicebus_emulator.testing import EmulatorProcess, run_emulator

# The worker imports the app by its file name from its folder, as a top-level module: the bench
# reads the invocations from that same module.
APP = Path(__file__).with_name("host_sessions_app.py")


def app_module() -> ModuleType:
    if str(APP.parent) not in sys.path:
        sys.path.insert(0, str(APP.parent))
    return importlib.import_module(APP.stem)


SLOT_COUNTS = (1, 8)
PROFILE_QUEUE = "profile"


def queue_name(slots: int) -> str:
    return f"sessions-{slots}"


def config(slot_counts: tuple[int, ...]) -> dict[str, Any]:
    def queue(name: str) -> dict[str, Any]:
        return {
            "Name": name,
            "Properties": {
                "RequiresSession": True,
                "LockDuration": "PT1M",
                "MaxDeliveryCount": 10,
                "DefaultMessageTimeToLive": "PT1H",
                "DeadLetteringOnMessageExpiration": False,
                "RequiresDuplicateDetection": False,
            },
        }

    names = [queue_name(n) for n in slot_counts] + [PROFILE_QUEUE]
    return {
        "UserConfig": {
            "Namespaces": [
                {"Name": "sbemulatorns", "Queues": [queue(n) for n in names], "Topics": []}
            ],
            "Logging": {"Type": "Console"},
        }
    }


# -- through the host -----------------------------------------------------------------------


def send_sessions(connection_string: str, queue: str, sessions: int, per_session: int) -> None:
    with (
        ServiceBusClient.from_connection_string(connection_string) as client,
        client.get_queue_sender(queue) as sender,
    ):
        for number in range(sessions):
            sender.send_messages(
                [
                    ServiceBusMessage(
                        json.dumps({"n": n, "last": n == per_session - 1}),
                        session_id=f"order-{number:04d}",
                    )
                    for n in range(per_session)
                ]
            )


def through_host(
    emulator: EmulatorProcess, slots: int, sessions: int, per_session: int
) -> dict[str, float]:
    connection_string = emulator.connection_string
    queue = queue_name(slots)
    send_sessions(connection_string, queue, sessions, per_session)
    invocations = app_module().INVOCATIONS
    invocations.reset(sessions * per_session)
    host_json = {
        "version": "2.0",
        "extensions": {
            "serviceBus": {
                "autoCompleteMessages": False,
                "maxConcurrentSessions": slots,
                "sessionIdleTimeout": "00:00:30",
                "maxAutoLockRenewalDuration": "00:05:00",
            }
        },
    }
    settings = {"BENCH_QUEUE": queue, "ServiceBusConnection": connection_string}
    with LocalHost(APP, settings, host_json, functions=["step"]):
        host_cpu, emulator_cpu = time.process_time(), sum(process_cpu_seconds(emulator.pid))
        if not invocations.done.wait(600):
            raise RuntimeError(f"only {len(invocations.calls)} invocations in 600 s")
        host_cpu = time.process_time() - host_cpu
        emulator_cpu = sum(process_cpu_seconds(emulator.pid)) - emulator_cpu
    calls = list(invocations.calls)
    first = min(started for _, started, _ in calls)
    last = max(ended for _, _, ended in calls)
    by_session: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for session_id, started, ended in calls:
        by_session[session_id].append((started, ended))
    spans = sorted((min(s for s, _ in c), max(e for _, e in c)) for c in by_session.values())
    # One slot: sessions run one after another, so each gap is the host's cost between them.
    gaps = [after[0] - before[1] for before, after in itertools.pairwise(spans)]
    elapsed = last - first
    return {
        "sessions/s": sessions / elapsed,
        "messages/s": sessions * per_session / elapsed,
        "seconds": elapsed,
        "gap ms": statistics.median(gaps) * 1000 if slots == 1 and gaps else float("nan"),
        # From the host's start: the first accepts are in it, the last closes are not.
        "host CPU ms/session": host_cpu / sessions * 1000,
        "emulator CPU ms/session": emulator_cpu / sessions * 1000,
    }


# -- the SDK alone --------------------------------------------------------------------------


def profile_sync(connection_string: str, sessions: int, per_session: int) -> dict[str, float]:
    phases: dict[str, list[float]] = defaultdict(list)

    def timed(name: str, operation: Callable[[], Any]) -> Any:
        started = time.perf_counter()
        result = operation()
        phases[name].append(time.perf_counter() - started)
        return result

    with ServiceBusClient.from_connection_string(connection_string, retry_total=0) as client:
        for _ in range(sessions):
            receiver = client.get_queue_receiver(
                PROFILE_QUEUE, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=5
            )
            timed("accept", receiver.__enter__)
            for _ in range(per_session):
                (message,) = timed(
                    "receive", functools.partial(receiver.receive_messages, max_message_count=1)
                )
                timed("get state", receiver.session.get_state)
                timed("set state", functools.partial(receiver.session.set_state, b"step"))
                timed("complete", functools.partial(receiver.complete_message, message))
            timed("close", receiver.close)
    return {name: statistics.median(values) * 1000 for name, values in phases.items()}


def profile_async(connection_string: str, sessions: int, per_session: int) -> dict[str, float]:
    phases: dict[str, list[float]] = defaultdict(list)

    async def timed(name: str, operation: Awaitable[Any]) -> Any:
        started = time.perf_counter()
        result = await operation
        phases[name].append(time.perf_counter() - started)
        return result

    async def run() -> None:
        async with AsyncServiceBusClient.from_connection_string(
            connection_string, retry_total=0
        ) as client:
            for _ in range(sessions):
                receiver = client.get_queue_receiver(
                    PROFILE_QUEUE, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=5
                )
                await timed("accept", receiver.__aenter__())
                for _ in range(per_session):
                    (message,) = await timed(
                        "receive", receiver.receive_messages(max_message_count=1)
                    )
                    await timed("get state", receiver.session.get_state())
                    await timed("set state", receiver.session.set_state(b"step"))
                    await timed("complete", receiver.complete_message(message))
                await timed("close", receiver.close())

    asyncio.run(run())
    return {name: statistics.median(values) * 1000 for name, values in phases.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--per-session", type=int, default=5)
    parser.add_argument("--slots", type=int, nargs="+", default=list(SLOT_COUNTS))
    parser.add_argument("--profile", action="store_true", help="time the SDK's phases first")
    args = parser.parse_args()
    load_before = load_average()
    with run_emulator(config(tuple(args.slots))) as emulator:
        connection_string = emulator.connection_string
        if args.profile:
            count = 10
            print(f"SDK alone, median ms per phase ({count} sessions x {args.per_session}):")
            for name, profile in (("sync", profile_sync), ("async", profile_async)):
                send_sessions(connection_string, PROFILE_QUEUE, count, args.per_session)
                phases = profile(connection_string, count, args.per_session)
                print(f"  {name:5s} " + "  ".join(f"{k} {v:.1f}" for k, v in phases.items()))
        results: dict[int, dict[str, float]] = {}
        for slots in args.slots:
            results[slots] = through_host(emulator, slots, args.sessions, args.per_session)
            print(f"  {slots} slot(s) done", file=sys.stderr, flush=True)
    print(machine_line(load_before, load_average()))
    print(f"{args.sessions} sessions of {args.per_session} messages, through the host\n")
    columns = list(next(iter(results.values())))
    print("| session slots | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for slots, figures in results.items():
        print(f"| {slots} | " + " | ".join(f"{figures[c]:.2f}" for c in columns) + " |")
    if len(results) > 1:
        low, high = min(results), max(results)
        ratio = results[high]["sessions/s"] / results[low]["sessions/s"]
        print(f"\n{high} slots / {low}: **{ratio:.1f}x** sessions/s")


if __name__ == "__main__":
    main()
