"""The hosts of one run: where they are listed and how their entries are read (HostQuery),
and the hosts that gives, each targeted for the transport that reaches it; or this machine
alone, where the run audits it without peers."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Optional

from preflight.config.container import spec_of
from preflight.config.errors import UsageError
from preflight.inventory import SELF_LISTED, load
from preflight.inventory.resolve import ContainerLayers
from preflight.model.host import Host, ThisMachine, Via, target_of


@dataclass(frozen=True)
class HostQuery:
    """Where the hosts of a run are listed, and how their entries are read."""

    inventory: Optional[str] = None  # a file, a hostlist, or None
    fmt: str = "auto"  # inventory.FORMATS
    ssh_config: Optional[str] = None  # -F: the OpenSSH config (None: the usual ones)
    limit: Optional[str] = None  # --limit PATTERN
    # --python: the training interpreter of the hosts whose inventory entry names none, and
    # of this machine audited alone (None: python3 there)
    python: Optional[str] = None
    cli_timeout: bool = False  # --connect-timeout given: it beats the config's ConnectTimeout
    containers: ContainerLayers = (None, None)  # the policy's and the command line's


def lists_hosts(inventory: Optional[str], fmt: str) -> bool:
    """Whether a run has hosts listed: an inventory, or a format that lists them by itself
    (the Slurm allocation's); without, a check audits this machine alone."""
    return bool(inventory) or fmt in SELF_LISTED


def hosts_of(query: HostQuery, via: Via, alone: bool) -> list[Host]:
    """The hosts to check, as the transport `via` reaches them: the inventory's, or this
    machine where the transport audits it alone (and reads no inventory)."""
    if alone:
        if query.inventory:
            raise UsageError(f"--transport local checks this machine alone; it reads no "
                             f"inventory ({query.inventory})")
        return [this_machine(query)]
    return [replace(h, target=target_of(via, h.ssh)) for h in inventory_hosts(query)]


def this_machine(query: HostQuery) -> Host:
    """This machine as the one host of a local audit, with the job's container on it (the
    policy's and the command line's)."""
    name = os.uname().nodename
    return Host(name=name, address="localhost", python=query.python or "python3",
                target=ThisMachine(),
                container=spec_of("command line", list(query.containers), name))


def inventory_hosts(query: HostQuery) -> list[Host]:
    """The inventory's hosts as SSH reaches them (the OpenSSH config applied, --limit), with
    the config's ConnectTimeout dropped when --connect-timeout was given."""
    hosts = load(query.inventory, query.fmt, query.ssh_config, query.limit, query.containers,
                 query.python)
    return cli_timeout_wins(hosts) if query.cli_timeout else hosts


def cli_timeout_wins(hosts: Sequence[Host]) -> list[Host]:
    """The hosts with their config's ConnectTimeout dropped, their hops' too: a
    --connect-timeout given on the command line wins over the OpenSSH config."""
    def dropped(h: Host) -> Host:
        return h.with_ssh(replace(h.ssh, connect_timeout=None,
                                  jump=tuple(dropped(j) for j in h.ssh.jump)))
    return [h if isinstance(h.target, ThisMachine) else dropped(h) for h in hosts]
