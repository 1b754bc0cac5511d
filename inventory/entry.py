"""What an inventory says of one host, before the user's OpenSSH config fills the rest in
(resolve.py): every SSH field may be unset, and an unset field is not a default."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from preflight.inventory import validate as V
from preflight.model.container import ContainerLayer


@dataclass(frozen=True)
class Entry:
    name: str
    address: Optional[str] = None  # unset: HostName from the config, else the name
    user: Optional[str] = None
    port: Optional[int] = None
    identity_file: Optional[str] = None
    known_hosts: Optional[str] = None
    jump: Optional[str] = None  # ProxyJump: "[user@]host[:port]", hops separated by commas
    python: Optional[str] = None  # the training Python; unset: --python's, else python3
    # Ansible's ansible_python_interpreter: the training Python when neither preflight_python
    # nor --python names one (it is often the modules' /usr/bin/python3, not the job's env).
    interpreter: Optional[str] = None
    probe_python: str = "python3"
    roles: tuple[str, ...] = V.ROLES
    groups: tuple[str, ...] = ()
    slots: Optional[int] = None  # a hostfile's slots: the host's ranks in the plan
    # The job's container as the inventory gives it (defaults, then the host), a checked
    # layer: the policy's goes below it and the command line's above (config/container.py).
    container: Optional[ContainerLayer] = None
    path: str = ""  # where it was read (a file, or how the hosts were given) and its line:
    line: Optional[int] = None  # errors found once it is resolved name them


@dataclass(frozen=True)
class Inventory:
    """The entries of a source, and the OpenSSH config it asks for (None: the default)."""

    entries: tuple[Entry, ...]
    source: str  # the file, or how the hosts were given ("-i 'node[01-04]'")
    ssh_config: Optional[str] = None
    fmt: str = "yaml"
