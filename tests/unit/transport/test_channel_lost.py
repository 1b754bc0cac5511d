"""A connection lost as a command starts (the host drops it, or the command ends its own
session before sshd answers the request) is a command whose connection was lost, said so,
never an exception out of SshRemote.run; a channel the host refuses on a connection that
stands is still the caller's to say."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from paramiko.ssh_exception import ChannelException

from preflight.transport.ssh.channel import SshRemote


class Buffer:
    def set_event(self, _event):
        pass


class Transport:
    def __init__(self, fail: BaseException, dies: bool) -> None:
        self.fail, self.dies, self.active = fail, dies, True
        self.saved_exception: BaseException | None = None

    def is_active(self) -> bool:
        return self.active

    def open_session(self, timeout=None):
        transport = self

        class Channel:
            in_buffer = in_stderr_buffer = Buffer()

            def exec_command(self, _command):
                if transport.dies:  # as paramiko's transport thread does on EOF
                    transport.saved_exception, transport.active = transport.fail, False
                raise transport.fail

            def close(self):
                pass
        return Channel()


def remote(transport: Transport) -> SshRemote:
    client = SimpleNamespace(get_transport=lambda: transport)
    return SshRemote("good1", SimpleNamespace(client=client, close=None, open=None))


def test_a_connection_lost_as_the_command_starts_is_said_as_lost():
    done = remote(Transport(EOFError(), dies=True)).run("kill -9 $PPID; sleep 10", 20)
    assert done.exit == -1 and done.stdout == ""
    assert done.tail() == "(the SSH connection to the host was lost: the host closed it)"


def test_a_channel_refused_on_a_connection_that_stands_is_the_callers():
    with pytest.raises(ChannelException):
        remote(Transport(ChannelException(1, "administratively prohibited"), dies=False)).run(
            "true", 20)
