"""Ports for the local stack: a service keeps its usual port unless another process listens
there, and then the user is told which process holds it.

A port whose last connections are still closing (TIME_WAIT, right after Ctrl-C) is free: the
probe binds with ``SO_REUSEADDR``, as every server of the stack does (Node's, asyncio's,
``http.server``'s), so ``make up`` right after ``make up`` gets the same ports.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

Announce = Callable[[str], None]

_LISTEN = "0A"  # the state column of /proc/net/tcp for a listening socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now (the OS may hand it out again later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when a server could listen on ``host:port`` now (with address reuse)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def choose_port(
    wanted: int | None, what: str, *, host: str = "127.0.0.1", announce: Announce | None = None
) -> int:
    """``wanted`` when it is free, else a free port (``announce`` says which process holds
    ``wanted``). ``None`` or ``0``: a free port, silently."""
    if not wanted:
        return free_port(host)
    if is_free(wanted, host):
        return wanted
    chosen = free_port(host)
    if announce:
        announce(f"Port {wanted} ({what}) is held by {holder_of(wanted)}: using {chosen} instead.")
    return chosen


def holder_of(port: int) -> str:
    """Which process listens on TCP ``port``, as "pid N (command line)", read from /proc;
    "another process" where /proc does not say (not Linux, or another user's process)."""
    inodes = set(_listening_inodes(port))
    if inodes:
        for pid, command in _processes_holding(inodes):
            return f"pid {pid} ({command})"
    return "another process"


def _listening_inodes(port: int) -> Iterator[str]:
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _LISTEN:
                continue
            if int(fields[1].rpartition(":")[2], 16) == port:
                yield fields[9]


def _processes_holding(inodes: set[str]) -> Iterator[tuple[int, str]]:
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            links = {os.readlink(fd) for fd in (entry / "fd").iterdir()}
        except OSError:
            continue
        if links & wanted:
            yield int(entry.name), _command_line(entry)


def _command_line(proc: Path, limit: int = 100) -> str:
    try:
        raw = (proc / "cmdline").read_bytes()
    except OSError:
        return "?"
    command = " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)
    return command if len(command) <= limit else command[: limit - 3] + "..."
