"""A host to check, and what collecting its facts gave: the facts, or why there are none."""

from __future__ import annotations

import enum
import os
import pwd
from dataclasses import dataclass, field, replace
from typing import Callable, Optional, Union

from preflight.model.container import ContainerSpec
from preflight.model.facts import HostFacts


def local_user() -> str:
    """The user running preflight: OpenSSH's default remote user (root is never assumed)."""
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:  # a uid with no passwd entry (some containers)
        return os.environ.get("USER") or str(os.getuid())


class Via(str, enum.Enum):
    """The transport that reaches a host (preflight.transport has one folder for each)."""

    SSH = "ssh"
    SLURM = "slurm"  # job steps through srun
    LOCAL = "local"  # this machine, audited alone: no SSH at all


@dataclass(frozen=True)
class SshTarget:
    """How SSH reaches a host: the inventory's values, then the user's OpenSSH config, then
    OpenSSH's defaults, already applied (see inventory.resolve). A Slurm node has one too:
    a node preflight drained is re-checked over SSH."""

    user: str = field(default_factory=lambda: local_user())
    port: int = 22
    identity_files: tuple[str, ...] = ()  # tried in order; none: ssh-agent and ~/.ssh/id_*
    # known_hosts files read, in order; the first is the one --accept-new-host-keys writes.
    known_hosts: tuple[str, ...] = ()
    jump: tuple[Host, ...] = ()  # ProxyJump hops, first hop first; each resolved like a host
    host_key_alias: Optional[str] = None  # HostKeyAlias: the name keys are looked up by
    hash_known_hosts: bool = False  # HashKnownHosts: how a newly accepted key is written
    connect_timeout: Optional[float] = None  # ConnectTimeout of the config, if it sets one


@dataclass(frozen=True)
class SlurmNode:
    """A host reached as a Slurm job step (srun; its node name is the host's name), and how
    SSH reaches it: a node preflight drained is re-checked over SSH, as Slurm runs no step
    there."""

    ssh: SshTarget = field(default_factory=SshTarget)


@dataclass(frozen=True)
class ThisMachine:
    """This machine, audited alone: the probe as a local process, no SSH and no peers."""


# How a host is reached: one target, whose kind names the transport (transport/table.py has
# the transport of each Via). A new transport is a new target type and its line here.
Target = Union[SshTarget, SlurmNode, ThisMachine]
TARGET_VIA: dict[type, Via] = {SshTarget: Via.SSH, SlurmNode: Via.SLURM, ThisMachine: Via.LOCAL}


def target_of(via: Via, ssh: SshTarget) -> Target:
    """The target of a host that `via` reaches, given how SSH would (a log records both)."""
    return _TARGET_OF[via](ssh)


_TARGET_OF: dict[Via, Callable[[SshTarget], Target]] = {
    Via.SSH: lambda ssh: ssh, Via.SLURM: SlurmNode, Via.LOCAL: lambda ssh: ThisMachine()}


@dataclass(frozen=True)
class Host:
    """One host to check: what every transport needs of it, and its target (how it is
    reached, which says by which transport)."""

    name: str  # as the inventory names it (an ssh_config alias is fine)
    address: str  # what its peers and SSH connect to: HostName after the config, else the name
    python: str = "python3"
    probe_python: str = "python3"
    roles: tuple[str, ...] = ("worker", "server")  # what the plan may make of it
    groups: tuple[str, ...] = ()  # inventory groups it belongs to (for --limit)
    slots: Optional[int] = None  # ranks the inventory gives it (a hostfile's slots=N)
    target: Target = field(default_factory=SshTarget)
    container: Optional[ContainerSpec] = None  # where the job runs; None: on the host itself

    @property
    def via(self) -> Via:
        """The transport that reaches it."""
        return TARGET_VIA[type(self.target)]

    @property
    def ssh(self) -> SshTarget:
        """How SSH reaches it: its target, or its Slurm node's way over SSH."""
        t = self.target
        if isinstance(t, SlurmNode):
            return t.ssh
        if isinstance(t, SshTarget):
            return t
        raise ValueError(f"{self.name} is this machine: SSH does not reach it")

    def with_ssh(self, ssh: SshTarget) -> Host:
        """The same host reached the same way, with SSH reaching it (or its node) by `ssh`."""
        return replace(self, target=SlurmNode(ssh) if isinstance(self.target, SlurmNode)
                       else ssh)

    @property
    def reached_over_ssh(self) -> Optional[SshTarget]:
        """How SSH reached it, when SSH is what reached it."""
        return self.target if isinstance(self.target, SshTarget) else None

    @property
    def key_names(self) -> tuple[str, ...]:
        """The names its host key is looked up by, as OpenSSH writes them: HostKeyAlias
        alone if set, else the address (HostName) and the name typed; [name]:port off 22."""
        t = self.ssh
        names = [t.host_key_alias] if t.host_key_alias else \
            list(dict.fromkeys([self.address, self.name]))
        return tuple(n if t.port == 22 else f"[{n}]:{t.port}" for n in names)


class Stage(str, enum.Enum):
    """Where a host's collection stopped; the order is the order of a run."""

    CONNECT = "connect"
    HOST_KEY = "host-key"
    AUTH = "auth"
    UPLOAD = "upload"
    PROBE = "probe"
    PARSE = "parse"
    TIMEOUT = "timeout"
    SLURM = "slurm"  # Slurm would not run a step on the node (down, drained, unknown)
    INTERRUPTED = "interrupted"  # the run was stopped (Ctrl-C, SIGTERM) before this host answered


@dataclass(frozen=True)
class HostFailure:
    """Why a host could not be checked, and at which stage."""

    stage: Stage
    reason: str


@dataclass(frozen=True)
class HostOutcome:
    """What collection learned of one host: its facts, or why there are none."""

    host: Host
    facts: Optional[HostFacts] = None
    failure: Optional[HostFailure] = None
    elapsed_s: float = 0.0
    received_at: float = 0.0  # controller's epoch time when the probe output arrived
    sent_at: float = 0.0  # controller's epoch time when the probe's command was sent
    # What the probe printed, as parsed into facts: the results log keeps it.
    probe_output: str = field(default="", repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.facts is not None

    @property
    def ip(self) -> Optional[str]:
        """The IP the host was reached at, as it saw it (None before it answered): what its
        peers connect to, with no DNS lookup on the controller, which may not resolve names
        that only the cluster's own DNS (behind a bastion) knows."""
        net = getattr(self.facts, "network", None) if self.facts is not None else None
        return getattr(net, "reached_at", None)
