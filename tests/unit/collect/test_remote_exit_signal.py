"""sshd's exit-signal is read before paramiko's own dispatch, which still sees every request
whole (its exit-status above all). Real paramiko objects, fed the messages sshd sends."""

from __future__ import annotations

import socket

import paramiko
from paramiko.message import Message

from preflight.transport.ssh import channel as remote


def transport_and_channel():
    a, b = socket.socketpair()
    transport = paramiko.Transport(a)  # not started: only its dispatch table is used
    chan = paramiko.Channel(0)
    chan.transport = transport
    return transport, chan, (a, b)


def request(*fields) -> Message:
    """A channel request's body as the dispatch gets it (its type and channel id read)."""
    m = Message()
    for f in fields:
        m.add_boolean(f) if isinstance(f, bool) else (
            m.add_int(f) if isinstance(f, int) else m.add_string(f))
    m.rewind()
    return m


def dispatch(transport, chan, m):
    transport._channel_handler_table[remote._MSG_CHANNEL_REQUEST](chan, m)


def test_the_signal_is_noted_and_paramiko_still_reads_exit_status():
    transport, chan, socks = transport_and_channel()
    try:
        remote.watch_exit_signals(transport)
        remote.watch_exit_signals(transport)  # idempotent: one hook, not two stacked
        dispatch(transport, chan, request("exit-signal", False, "KILL", True, "", ""))
        assert remote.exit_signal(chan) == ("KILL", True)
        assert chan.exit_status == -1  # paramiko's view is unchanged

        other = paramiko.Channel(1)
        other.transport = transport
        dispatch(transport, other, request("exit-status", False, 3))
        assert other.exit_status == 3 and remote.exit_signal(other) is None
    finally:
        for s in socks:
            s.close()


def test_only_the_watched_transport_is_hooked():
    (t1, _, s1), (t2, c2, s2) = transport_and_channel(), transport_and_channel()
    try:
        remote.watch_exit_signals(t1)
        dispatch(t2, c2, request("exit-signal", False, "TERM", False, "", ""))
        assert remote.exit_signal(c2) is None
        assert type(t2)._channel_handler_table is t2._channel_handler_table
    finally:
        for s in (*s1, *s2):
            s.close()


def test_an_unreadable_request_is_left_to_paramiko():
    transport, chan, socks = transport_and_channel()
    try:
        remote.watch_exit_signals(transport)
        dispatch(transport, chan, request("exit-signal", False))  # cut short
        assert remote.exit_signal(chan) is None and chan.exit_status == -1
    finally:
        for s in socks:
            s.close()


def test_a_connection_whose_transport_thread_noted_its_loss_reads_as_lost():
    # paramiko's transport thread, losing the connection, notes why, then closes every
    # channel (waking its waiter), and only then turns inactive: the waiter sees it active.
    transport, _, socks = transport_and_channel()
    try:
        transport.active = True  # as while its thread runs
        assert remote.connection_alive(transport)
        transport.saved_exception = EOFError()  # the host closed the connection
        assert not remote.connection_alive(transport)
        assert remote.lost_why(transport) == ": the host closed it"
        # A channel the host refused to open is noted there too; the connection stands.
        transport.saved_exception = paramiko.ChannelException(1, "administratively prohibited")
        assert remote.connection_alive(transport)
        transport.saved_exception, transport.active = None, False
        assert not remote.connection_alive(transport) and not remote.connection_alive(None)
    finally:
        transport.active = False
        for s in socks:
            s.close()
