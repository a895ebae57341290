"""The session state as the host's Settlement service serves it: read from the broker once per
held session, then known to the host (it holds the session lock, so no one else can change
it) until a write fails or the lock expires by the clock."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

import pytest
from azure.servicebus import ServiceBusReceivedMessage
from azure.servicebus.exceptions import SessionLockLostError

from functions_local_host.settlement import HeldSession


def _in(seconds: float) -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds)


@dataclass
class BrokerSession:
    """An in-memory twin of a session on the broker, counting the host's round trips."""

    stored: bytes | None = None
    locked_until_utc: datetime.datetime | None = field(default_factory=lambda: _in(60))
    reads: int = 0
    writes: int = 0
    fail_writes: bool = False
    session_id: str = "s1"

    def get_state(self) -> bytes | None:
        self.reads += 1
        return self.stored

    def set_state(self, state: bytes | None) -> None:
        self.writes += 1
        if self.fail_writes:
            raise SessionLockLostError()
        self.stored = state

    def renew_lock(self) -> datetime.datetime:
        self.locked_until_utc = _in(60)
        return self.locked_until_utc


@dataclass
class Receiver:
    session: BrokerSession

    def complete_message(self, message: ServiceBusReceivedMessage) -> None: ...
    def abandon_message(self, message: ServiceBusReceivedMessage) -> None: ...
    def defer_message(self, message: ServiceBusReceivedMessage) -> None: ...
    def dead_letter_message(
        self, message: Any, reason: Any = None, error_description: Any = None
    ) -> None: ...
    def renew_message_lock(self, message: ServiceBusReceivedMessage) -> datetime.datetime:
        return _in(60)


def held(broker: BrokerSession) -> HeldSession:
    return HeldSession("s1", Receiver(broker))


def test_the_state_is_read_from_the_broker_once_then_known_to_the_host() -> None:
    broker = BrokerSession(stored=b'{"next_step": 2}')
    session = held(broker)
    first = session.state(broker.get_state)
    session.write_state(b'{"next_step": 3}', broker.set_state)
    second = session.state(broker.get_state)
    session.write_state(None, broker.set_state)
    third = session.state(broker.get_state)

    assert (first, second, third) == (b'{"next_step": 2}', b'{"next_step": 3}', None)
    assert (broker.reads, broker.writes, broker.stored) == (1, 2, None)


def test_a_failed_write_is_forgotten_and_the_state_read_again() -> None:
    broker = BrokerSession(stored=b"before")
    session = held(broker)
    session.state(broker.get_state)
    broker.fail_writes = True
    with pytest.raises(SessionLockLostError):
        session.write_state(b"after", broker.set_state)

    assert session.state(broker.get_state) == b"before"
    assert broker.reads == 2


def test_once_the_lock_has_expired_by_the_clock_the_broker_is_asked_again() -> None:
    broker = BrokerSession(stored=b"kept")
    session = held(broker)
    session.state(broker.get_state)
    broker.locked_until_utc = _in(-1)

    session.state(broker.get_state)
    assert broker.reads == 2
