"""Sleeping until a paramiko channel has something to read, without paramiko's OS pipe.

paramiko's Channel.fileno() makes a pipe that its transport thread writes to whenever data
arrives, and Channel.close() closes that pipe without stopping the transport thread first
(paramiko #1700, #2271, unfixed in 5.x). Data that arrives while a channel is being closed (a
command cut off while it prints, a poll that timed out) makes the transport thread write to
a closed descriptor: EBADF ends the transport thread, and with it the connection and every
other command on it (seen: an all-reduce rank lost to its own progress polls). Were that
descriptor's number reused meanwhile, the byte would go into whatever file or socket holds
it now. A threading.Event has no descriptor to lose: ChannelWake is one, handed to the
channel's buffers in place of the pipe."""

from __future__ import annotations

import threading
from typing import Any


class ChannelWake:
    """Set when data or EOF reaches the channel's stdout or stderr buffer.

    The buffers also clear their event when a read empties them; that is ignored here: a
    read emptying one stream must not hide data waiting on the other. The waiter clears it
    (arm) before it reads, so whatever arrives after that read wakes the next wait."""

    def __init__(self, channel: Any) -> None:
        self._event = threading.Event()
        channel.in_buffer.set_event(self)
        channel.in_stderr_buffer.set_event(self)

    def set(self) -> None:  # the buffers' call, from the transport thread
        self._event.set()

    def clear(self) -> None:  # the buffers' call on an emptying read: see the class
        pass

    def arm(self) -> None:
        """Forgets past wakes: call before reading what is there."""
        self._event.clear()

    def wait(self, timeout: float) -> bool:
        """Sleeps until something arrived since arm(), at most timeout seconds."""
        return self._event.wait(timeout)
