"""ChannelWake: a channel's reader sleeps until the transport thread feeds either stream,
with no OS descriptor for a close to race (transport/ssh/wake.py)."""

from __future__ import annotations

import threading

from paramiko.buffered_pipe import BufferedPipe

from preflight.transport.ssh.wake import ChannelWake


class Buffers:
    def __init__(self) -> None:
        self.in_buffer: BufferedPipe[bytes] = BufferedPipe()
        self.in_stderr_buffer: BufferedPipe[bytes] = BufferedPipe()


def test_data_on_either_stream_wakes_the_reader_and_arm_forgets_what_was_read():
    ch = Buffers()
    wake = ChannelWake(ch)
    assert not wake.wait(0.01)
    threading.Timer(0.1, ch.in_stderr_buffer.feed, (b"err",)).start()
    assert wake.wait(30.0)  # only the feed can end it this soon
    wake.arm()
    assert not wake.wait(0.01)


def test_a_read_that_empties_one_stream_does_not_hide_data_on_the_other():
    ch = Buffers()
    wake = ChannelWake(ch)
    ch.in_buffer.feed(b"out")
    wake.arm()  # the reader is about to read what is there
    ch.in_stderr_buffer.feed(b"err")  # arrives meanwhile
    assert ch.in_buffer.read(10) == b"out"  # empties stdout: paramiko clears its event
    assert wake.wait(0.01)  # the stderr that came after arm still wakes the next wait


def test_data_there_before_it_was_made_and_eof_wake_it():
    ch = Buffers()
    ch.in_buffer.feed(b"early")
    assert ChannelWake(ch).wait(0.01)
    ch = Buffers()
    wake = ChannelWake(ch)
    ch.in_buffer.close()  # the host's EOF
    assert wake.wait(0.01)
