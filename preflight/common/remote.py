"""Commands on hosts already reached, whatever reached them: what a finished command gave
(Done), the protocol of a host to run commands on (Remote) and of a command running there
(Started), and running calls in parallel within a bound. Each transport has its Remote
(transport/ssh's over a paramiko channel, transport/slurm's as job steps, transport/local's
as processes); the active tests and `preflight launch` use only this."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Optional, Protocol

MAX_OUTPUT = 4 << 20  # what one command may print before the rest is dropped
POLL_S = 0.01


@dataclass(frozen=True)
class Done:
    """A finished (or cut-off) command: exit None means it did not end in time."""

    exit: Optional[int]
    stdout: str
    stderr: str
    overflow: bool = False  # cut off for printing more than it may

    @property
    def ok(self) -> bool:
        return self.exit == 0

    def tail(self, lines: int = 3) -> str:
        text = (self.stderr.strip() or self.stdout.strip()).splitlines()[-lines:]
        return " | ".join(text)[:400] or "no output"


class Started(Protocol):
    """A command running on a host."""

    def read_until(self, marker: str, timeout: float) -> bool: ...
    def output(self) -> str: ...
    def take(self) -> bytes: ...
    def wait(self, timeout: float) -> Done: ...
    def close(self) -> None: ...


class Remote(Protocol):
    """One host to run commands on (over SSH, or this machine)."""

    name: str

    def start(self, command: str) -> Started: ...
    def run(self, command: str, timeout: float) -> Done: ...


def in_parallel(calls: Sequence[Callable[[], None]], limit: float, name: str = "remote",
                ) -> None:
    """Runs each call in its own daemon thread and waits for all of them, at most limit
    seconds in all; a call still running then is left behind (each bounds itself too)."""
    threads = [threading.Thread(target=call, daemon=True, name=f"{name}-{i}")
               for i, call in enumerate(calls)]
    for t in threads:
        t.start()
    end = time.monotonic() + limit
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
