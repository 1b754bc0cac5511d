"""The one table of transports: the name a user gives (--transport) -> its class."""

from __future__ import annotations

from typing import Optional

from preflight.model.host import Via
from preflight.transport.base import Transport
from preflight.transport.local.transport import LocalTransport
from preflight.transport.slurm.transport import SlurmTransport
from preflight.transport.ssh.transport import SshTransport

TRANSPORTS: dict[Via, type[Transport]] = {
    Via.SSH: SshTransport,
    Via.SLURM: SlurmTransport,
    Via.LOCAL: LocalTransport,
}


def inventory_format(via: Via, inventory: Optional[str], fmt: str) -> str:
    """How the hosts are read: as given, or the transport's own source when no inventory
    is given (Slurm: the allocation's nodes)."""
    default = TRANSPORTS[via].default_format
    return default if default and not inventory else fmt


def pick(via: Via, listed: bool) -> type[Transport]:
    """The transport of a run: the one named, except that SSH with no hosts to reach
    (listed: an inventory, or a format that lists hosts by itself) audits this machine
    alone."""
    if via is Via.SSH and not listed:
        return LocalTransport
    return TRANSPORTS[via]


def new(via: Via, listed: bool) -> Transport:
    return pick(via, listed)()
