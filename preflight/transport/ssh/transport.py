"""SSH (the default): the probe over one Fabric connection per host, kept open for the active
tests; `preflight launch` and `watch` over connections opened by reach()."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, ClassVar, Optional

from preflight.common.hostjob import CollectOptions, OnResult, ProbeCall, fan_out
from preflight.common.remote import Remote, in_parallel
from preflight.model.host import Host, HostOutcome, Stage, Via
from preflight.model.report import ReachNotes
from preflight.model.watch import SchedulerEnd
from preflight.transport.base import BatchJob, Submitted, no_batch
from preflight.transport.ssh import connect as ssh
from preflight.transport.ssh.channel import SshRemote
from preflight.transport.ssh.job import SshJob

# How often an open connection's reader thread wakes when nothing arrives. paramiko's 0.1 s
# is 10 wake-ups a second per host: for the long-lived connections of `launch` and `watch`
# that was most of the controller's CPU (a watch of 64 hosts at one sample each 5 s spent
# more in those wake-ups than in reading and judging the samples). Data wakes it at once.
IDLE_POLL_S = 5.0


def _idle_poll(conn: Any, seconds: float) -> None:
    transport = conn.client.get_transport()
    sock = getattr(transport, "sock", None)
    if sock is not None and hasattr(sock, "settimeout"):
        sock.settimeout(seconds)


class SshTransport:
    via: ClassVar[Via] = Via.SSH
    alone: ClassVar[bool] = False
    batch: ClassVar[bool] = False
    default_format: ClassVar[Optional[str]] = None

    def __init__(self) -> None:
        self.connections: dict[str, Any] = {}
        self.open_timeout = CollectOptions.connect_timeout

    def collect(self, hosts: Sequence[Host], opts: CollectOptions, call: ProbeCall,
                on_result: Optional[OnResult] = None) -> list[HostOutcome]:
        self.open_timeout = opts.connect_timeout
        ssh.quiet_paramiko()
        return fan_out(hosts, opts, SshJob, call, on_result=on_result,
                       connections=self.connections)

    def remotes(self) -> dict[str, Remote]:
        return {name: SshRemote(name, conn, self.open_timeout)
                for name, conn in self.connections.items()}

    def notes(self) -> ReachNotes:
        return ReachNotes()

    def reach(self, hosts: Sequence[Host], connect_timeout: float,
              accept_new_host_keys: bool) -> dict[str, str]:
        """Opens a connection to every host, in parallel; returns {host: why not}."""
        self.open_timeout = connect_timeout
        failed: dict[str, str] = {}
        ssh.quiet_paramiko()
        limit = connect_timeout * 3 + 5

        def one(host: Host) -> None:
            conn = ssh.connection(host, connect_timeout, accept_new_host_keys)
            try:
                conn.open()
                _idle_poll(conn, IDLE_POLL_S)
                self.connections[host.name] = conn
            except Exception as e:
                failed[host.name] = ssh.classify(e, Stage.CONNECT, host,
                                                 connect_timeout).reason
                conn.close()

        in_parallel([functools.partial(one, h) for h in hosts], limit, "connect")
        for h in hosts:
            if h.name not in self.connections and h.name not in failed:
                failed[h.name] = f"no connection within {limit:.0f} s"
        return failed

    def submit(self, job: BatchJob) -> Submitted:
        return no_batch(self.via)

    def follow(self, jobid: str) -> None:
        pass  # no scheduler: the commands run on the hosts as they are

    def job_end(self) -> Optional[SchedulerEnd]:
        return None

    def close(self) -> None:
        for conn in self.connections.values():
            conn.close()
        self.connections.clear()
        ssh.close_gateways()
