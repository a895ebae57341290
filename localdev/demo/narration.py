"""How the demo tells its story on stdout: step titles with the time since the start, plain
lines, each check's verdict, and progress lines while it waits for something."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

POLL_EVERY = 0.5  # seconds between two looks at what the demo waits for
PROGRESS_EVERY = 3.0  # at most one progress line this often, and only when something changed
QUIET_AT_MOST = 10.0  # a progress line at least this often, changed or not


@dataclass
class Narrator:
    deadline: float  # time.monotonic() after which the demo gives up waiting
    started: float = field(default_factory=time.monotonic)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def say(self, text: str = "") -> None:
        print(text, flush=True)

    def step(self, title: str) -> None:
        self.say(f"\n== {title}  [{self.elapsed():.0f} s]")

    def verdict(self, claim: str, ok: bool) -> None:
        self.say(f"   [{'ok' if ok else 'FAILED'}] {claim}")

    def progress(self, text: str) -> None:
        self.say(f"   [{self.elapsed():5.1f} s] {text}")

    def wait(self, done: Callable[[], bool], progress: Callable[[], str], timeout: float) -> bool:
        """Look at ``done`` every half second; print ``progress()`` when it changed (every
        few seconds at most, every ten at least) and once more at the end. False when
        ``timeout`` (or the demo's deadline) passes first."""
        until = min(self.deadline, time.monotonic() + timeout)
        shown, shown_at = "", time.monotonic()
        while True:
            if done():
                self.progress(progress())
                return True
            now = time.monotonic()
            if now >= until:
                self.progress(f"{progress()}  (gave up waiting)")
                return False
            if now - shown_at >= PROGRESS_EVERY:
                text = progress()
                if text != shown or now - shown_at >= QUIET_AT_MOST:
                    self.progress(text)
                    shown, shown_at = text, now
            time.sleep(POLL_EVERY)
