"""Commands over an SSH connection (a paramiko channel each): run to completion or start in
the background, every wait bounded, and how one that ended without an exit status ended
(the signal sshd named, or the connection lost). SshRemote is the Remote (common/remote.py)
the active tests use over the connections the probe opened."""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, Optional

from paramiko.ssh_exception import ChannelException, SSHException

from preflight.common.remote import MAX_OUTPUT, POLL_S, Done, Started
from preflight.transport.ssh.wake import ChannelWake


def run_with_input(transport: Any, command: str, data: bytes, timeout: float,
                   on_sent: Optional[Callable[[], None]] = None) -> Done:
    """Runs command on a new channel with data as its whole stdin and returns when it
    exits; exit None when timeout passes first, or when either stream passes MAX_OUTPUT
    (the command is then cut off, overflow set: its output is untrusted and must not fill
    our memory). on_sent is called once data is on its way."""
    end = time.monotonic() + timeout
    ch = _Channel(transport, command, max(0.1, timeout))
    try:
        ch.ch.settimeout(max(0.1, end - time.monotonic()))
        ch.ch.sendall(data)
        ch.ch.shutdown_write()  # EOF: the host's python starts reading at once
        if on_sent:
            on_sent()
        return ch.wait(max(0.0, end - time.monotonic()), cut_off=True)
    finally:
        ch.close()


class _Channel:
    """A paramiko session channel running one command; reads both streams, bounded."""

    def __init__(self, transport: Any, command: str, open_timeout: float) -> None:
        watch_exit_signals(transport)  # before the command can end: its signal is read then
        self.ch = transport.open_session(timeout=open_timeout)
        self.wake = ChannelWake(self.ch)  # never ch.fileno(): see wake.py
        self.ch.exec_command(command)
        self.out, self.err = bytearray(), bytearray()
        self.overflow = False  # a stream passed MAX_OUTPUT; the rest was dropped

    def _pump(self) -> bool:
        """Reads what is there; returns True if anything was read."""
        got = False
        for ready, recv, buf in ((self.ch.recv_ready, self.ch.recv, self.out),
                                 (self.ch.recv_stderr_ready, self.ch.recv_stderr, self.err)):
            while ready():
                data = recv(65536)
                if len(buf) < MAX_OUTPUT:
                    buf += data
                else:
                    self.overflow = True
                got = True
        return got

    def read_until(self, marker: str, timeout: float) -> bool:
        end = time.monotonic() + timeout
        needle = marker.encode()
        while time.monotonic() < end:
            self.wake.arm()
            self._pump()
            if needle in self.out:
                return True
            if self.ch.exit_status_ready() and not self.ch.recv_ready():
                self._pump()
                return needle in self.out
            self.wake.wait(min(POLL_S, max(0.0, end - time.monotonic())))
        return False

    def output(self) -> str:
        """Returns what the command printed on stdout so far."""
        return self.out.decode("utf-8", "replace")

    def take(self) -> bytes:
        """Returns the stdout printed since the last take and forgets it: for streaming a
        long command's output without keeping it."""
        self._pump()
        data = bytes(self.out)
        del self.out[:len(data)]
        return data

    def wait(self, timeout: float, cut_off: bool = False) -> Done:
        """Waits for the command's end (exit None: not within timeout, or, with cut_off,
        stopped reading once its output passed MAX_OUTPUT).

        Sleeps until the channel's buffers wake it (wake.py), not by polling: a controller
        waits on one channel per host at once. Data and the channel's EOF or close wake it;
        the exit status alone does not, hence the short cap."""
        end = time.monotonic() + timeout
        while True:  # at least once: wait(0) still sees a command that has ended
            self.wake.arm()
            got = self._pump()
            if cut_off and self.overflow:
                return self._done(None)
            if self.ch.exit_status_ready() and not got and not self.ch.recv_ready() \
                    and not self.ch.recv_stderr_ready():
                self._pump()
                return self._done(self.ch.recv_exit_status())
            left = end - time.monotonic()
            if left <= 0:
                return self._done(None)
            if not got:
                self.wake.wait(min(left, 0.2))

    def _done(self, exit: Optional[int]) -> Done:
        err = self.err.decode("utf-8", "replace")
        if exit == -1:
            # paramiko's -1: the channel closed with no exit status. sshd sends none when the
            # command died of a signal (it sends exit-signal, read below), and
            # none comes when the connection itself went; say which, or "no output" says
            # nothing.
            transport = self.ch.get_transport()
            died = exit_signal(self.ch)
            if died is not None:
                err += f"\n(killed by signal {died[0]}{', core dumped' if died[1] else ''})"
            elif connection_alive(transport):
                err += "\n(ended with no exit status: killed by a signal?)"
            else:
                err += f"\n(the SSH connection to the host was lost{lost_why(transport)})"
        return Done(exit, self.out.decode("utf-8", "replace"), err, self.overflow)

    def close(self) -> None:
        try:
            self.ch.close()
        except Exception:
            pass


def connection_alive(transport: Any) -> bool:
    """Whether the connection still stands. paramiko's transport thread, on losing it, first
    notes why (saved_exception), then closes every channel (which wakes their waiters) and
    only then turns inactive: a waiter woken by that close still sees is_active() true. (A
    channel the host refused to open is noted there too, and leaves the connection up.)"""
    if transport is None or not transport.is_active():
        return False
    why = getattr(transport, "saved_exception", None)
    return why is None or isinstance(why, ChannelException)


def lost_why(transport: Any) -> str:
    """How paramiko's transport thread ended, as a suffix: the host closed the connection
    (EOF: its sshd session ended), the socket failed, or the protocol did."""
    why = getattr(transport, "saved_exception", None)
    if why is None:
        return ""
    if isinstance(why, EOFError):
        return ": the host closed it"
    return f": {type(why).__name__}: {why}"[:200]


class SshRemote:
    """Commands on a host over an open Fabric connection, each on its own channel."""

    def __init__(self, name: str, conn: Any, open_timeout: float = 10.0) -> None:
        self.name, self.conn, self.open_timeout = name, conn, open_timeout
        self._lock = threading.Lock()

    def _transport(self) -> Any:
        """The connection's transport, connected again once it was lost: a connection that
        dropped mid-run must not keep the later commands (stopping, cleaning up) from the
        host. A host that is gone fails here as any command to it would (connect timeout);
        a connection closed on purpose (no transport left) is not opened again."""
        with self._lock:
            transport = self.conn.client.get_transport()
            if transport is not None and not transport.is_active():
                self.conn.close()
                self.conn.open()
                transport = self.conn.client.get_transport()
            return transport

    def start(self, command: str) -> Started:
        return _Channel(self._transport(), command, self.open_timeout)

    def run(self, command: str, timeout: float) -> Done:
        transport = self._transport()
        try:
            ch = _Channel(transport, command, self.open_timeout)
        except (EOFError, SSHException):
            if connection_alive(transport):
                raise  # the host refused a channel: the connection stands, said by the caller
            # The connection went as the command started: the host dropped it, or the
            # command itself ended its session (sshd starts a command before it answers the
            # request; seen with `kill -9 $PPID` on a loaded machine). As any command whose
            # connection was lost, not an exception.
            return Done(-1, "", f"(the SSH connection to the host was lost"
                                f"{lost_why(transport)})")
        try:
            return ch.wait(timeout)
        finally:
            ch.close()


# ---------------------------------------------------------------- the signal that ended it
# sshd reports a command that died of a signal with "exit-signal" (RFC 4254 6.10: the
# signal's name without "SIG", whether it dumped core) instead of "exit-status". paramiko
# reads only the latter and drops the former, so its channel says -1 and not which signal:
# KILL (the OOM killer, a scheduler's hard stop), TERM (an operator, a job's epilog), HUP (a
# session torn down) are different stories for whoever reads the finding. The transports
# preflight opens read the request before paramiko does and leave the rest to it. This
# hooks paramiko's per-message dispatch table, which is not public API: where a paramiko
# release lays it out differently nothing is hooked, and such a command reads as before.

_MSG_CHANNEL_REQUEST = 98  # SSH_MSG_CHANNEL_REQUEST (RFC 4250 4.1.2): paramiko's key too

# channel -> (signal name, core dumped); weak, so a closed channel takes its entry along.
_SIGNALS: weakref.WeakKeyDictionary[Any, tuple[str, bool]] = weakref.WeakKeyDictionary()
_HOOKED = "_preflight_exit_signal"


def watch_exit_signals(transport: Any) -> None:
    """Makes transport note every channel's exit-signal; once per transport, idempotent."""
    if transport is None or getattr(transport, _HOOKED, False):
        return
    table = getattr(transport, "_channel_handler_table", None)
    if not isinstance(table, dict) or table.get(_MSG_CHANNEL_REQUEST) is None:
        return
    original = table[_MSG_CHANNEL_REQUEST]
    # The instance's own copy: other transports (and other users of paramiko) keep theirs.
    mine = dict(table)
    mine[_MSG_CHANNEL_REQUEST] = _reader(original)
    try:
        transport._channel_handler_table = mine
        setattr(transport, _HOOKED, True)
    except AttributeError:  # pragma: no cover - a transport that takes no attributes
        pass


def _reader(original: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
    def handle(chan: Any, m: Any) -> None:
        packet = getattr(m, "packet", None)
        if packet is None:
            original(chan, m)
            return
        start = packet.tell()
        try:
            if m.get_text() == "exit-signal":
                m.get_boolean()  # want-reply: sshd sends False
                name, core = m.get_text(), m.get_boolean()
                if name:  # paramiko reads past a short message as empty
                    _SIGNALS[chan] = (name, core)
        except Exception:
            pass  # a request we cannot read is paramiko's to refuse, as before
        finally:
            packet.seek(start)
        original(chan, m)

    return handle


def exit_signal(chan: Any) -> Optional[tuple[str, bool]]:
    """The (signal name, core dumped) that ended chan's command, if sshd said so."""
    try:
        return _SIGNALS.get(chan)
    except TypeError:  # pragma: no cover - a channel that cannot be weakly referenced
        return None
