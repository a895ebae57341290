"""The broker's clock: the time now, in milliseconds since the Unix epoch, as every lock,
timer, TTL and timestamp of the emulator counts it."""

from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.time() * 1000)
