"""The placement plan: which hosts run what, on which ports, and which were left out and why."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Optional

from preflight.model.container import ContainerSpec
from preflight.model.policy import JobShape, Mode

LAUNCHER = ("-m", "paddle.distributed.launch")
CostOf = Literal["all-reduce", "ps-step"]
# The launcher's variables that no flag carries: where it looks for rank ports, which
# interface gloo binds (otherwise where the hostname resolves, often 127.0.0.1), and which one
# NCCL's bootstrap takes (otherwise its own pick: docker0, a BMC's NIC).
FLAG_ENV = ("PORT_RANGE", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
DEVICES_ENV = "PADDLE_DEVICES"  # the launcher's variable for --devices


@dataclass(frozen=True)
class Endpoint:
    """One process the launcher starts: a trainer or server (ps), or a worker host's first
    rank port (collective)."""

    host: str
    address: str
    port: int

    def __str__(self) -> str:
        return f"{self.address}:{self.port}"


@dataclass(frozen=True)
class Node:
    """One host of the plan: what it runs and the launcher command that runs it."""

    host: str
    address: str
    python: str
    rank: int  # collective: the node rank; ps: its place in the plan's host order
    nproc: int  # processes the launcher starts here
    ports: tuple[int, ...]  # every port the plan reserves on this host
    argv: tuple[str, ...]  # the launcher command; the training script and its args follow
    env: tuple[tuple[str, str], ...]  # Paddle's own variables for the same plan, and more
    container: Optional[ContainerSpec] = None  # the job's container; None: on the host

    def flag_env(self) -> list[tuple[str, str]]:
        """Returns the variables the flags cannot carry (they go before the command)."""
        return [(k, v) for k, v in self.env if k in FLAG_ENV]

    def command(self, script: Sequence[str] = ()) -> str:
        """Returns the launcher command line, shell-quoted: `VAR=v python -m ... [script]`
        (in the job's container: common.containercmd.node_command)."""
        q = shlex.quote
        return " ".join([*(f"{k}={q(v)}" for k, v in self.flag_env()),
                         *(q(a) for a in (*self.argv, *script))])


@dataclass(frozen=True)
class StragglerCost:
    """What keeping a left-out host would cost the job: its all-reduce of nbytes (collective),
    or a trainer's step with the host as a server, nbytes then being what one step exchanges
    with a server (ps); seconds with it and without it, and how that was found."""

    nbytes: int
    with_s: float
    without_s: float
    basis: str
    what: CostOf = "all-reduce"
    # ps-step: the bytes a step would exchange with a server at which the host costs 2x (the
    # round's own model is small); None: it never would (its link is over half the others')
    double_at: Optional[float] = None

    @property
    def factor(self) -> float:
        return self.with_s / self.without_s if self.without_s > 0 else float("inf")


@dataclass(frozen=True)
class Plan:
    """A job that fits the hosts that passed; `lacks` says what the requested shape misses."""

    mode: Mode
    shape: JobShape
    nodes: tuple[Node, ...] = ()
    workers: tuple[Endpoint, ...] = ()  # trainers (ps) or worker hosts (collective)
    servers: tuple[Endpoint, ...] = ()
    master: Optional[str] = None  # collective: the launcher's rendezvous endpoint
    nproc_per_node: Optional[int] = None
    excluded: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    lacks: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    costs: Mapping[str, StragglerCost] = field(default_factory=dict)  # by left-out host

    @property
    def fits(self) -> bool:
        return bool(self.nodes) and not self.lacks

    def hosts(self) -> tuple[str, ...]:
        return tuple(n.host for n in self.nodes)

    def node(self, host: str) -> Optional[Node]:
        return next((n for n in self.nodes if n.host == host), None)

    def roles(self) -> dict[str, str]:
        """Each host's part in the job: "server", "trainer" or "server and trainer" (ps);
        "worker", with "and master" where the launcher's rendezvous is (collective)."""
        out: dict[str, str] = {}
        master = self.master.rsplit(":", 1)[0] if self.master else None
        for n in self.nodes:
            if self.mode == "ps":
                parts = [r for r, eps in (("server", self.servers), ("trainer", self.workers))
                         if any(e.host == n.host for e in eps)]
            else:
                parts = ["worker"] + (["master"] if n.address == master else [])
            out[n.host] = " and ".join(parts)
        return out
