"""A host's network facts, as the probe read them: its interfaces and addresses, its RDMA
ports, the kernel's neighbour tables (re-exported by model/facts.py, where HostFacts holds
them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Interface:
    name: str
    mtu: Optional[int]
    state: Optional[str]
    speed_mbps: Optional[int]
    addresses: tuple[str, ...] = ()


@dataclass(frozen=True)
class IbPort:
    """One RDMA port as /sys/class/infiniband shows it."""

    device: str
    port: int
    state: Optional[str]  # ACTIVE, DOWN, INIT, ARMED, ...
    rate_gbps: Optional[float]
    link_layer: Optional[str] = None  # InfiniBand, or Ethernet (RoCE)


@dataclass(frozen=True)
class NeighbourTable:
    """One of the kernel's neighbour tables (ARP for IPv4, ND for IPv6): its limits, its
    entries when probed, the times it was found full since boot, and its id (a random seed
    per table: hosts that report one id share one kernel, and so one table and one limit)."""

    family: str  # ipv4, ipv6
    thresh1: int
    thresh2: int
    thresh3: int  # the most entries the table holds: past it new neighbours fail
    entries: Optional[int] = None
    table_id: Optional[int] = None
    table_fulls: Optional[int] = None


@dataclass(frozen=True)
class NetworkFacts:
    interfaces: tuple[Interface, ...]
    default_route: Optional[str] = None  # interface of the default route
    infiniband: tuple[str, ...] = ()  # RDMA devices in /sys/class/infiniband
    reached_at: Optional[str] = None  # the IP SSH reached the host at (SSH_CONNECTION)
    ib_ports: tuple[IbPort, ...] = ()
    # The neighbour tables; None: not read (the probe's reason in neighbours_error)
    neighbours: Optional[tuple[NeighbourTable, ...]] = None
    neighbours_error: Optional[str] = None

    def neighbour_table(self, family: str) -> Optional[NeighbourTable]:
        return next((t for t in self.neighbours or () if t.family == family), None)

    def active_ib_ports(self) -> list[IbPort]:
        """The RDMA ports in the ACTIVE state: those NCCL can use."""
        return [p for p in self.ib_ports if (p.state or "").upper() == "ACTIVE"]

    def interface_with(self, address: str) -> Optional[Interface]:
        """Returns the interface that holds address (an inventory IP), if any."""
        for i in self.interfaces:
            if any(a.split("/")[0] == address for a in i.addresses):
                return i
        return None

    def interface(self, name: Optional[str]) -> Optional[Interface]:
        return next((i for i in self.interfaces if i.name == name), None)

    def job_interface(self, address: str) -> Optional[Interface]:
        """Returns the interface the job's traffic uses: the one holding the inventory address
        (what peers connect to), or the address SSH reached it at (a DNS name); for a NAT
        address, which no interface holds, the default route's, the best guess."""
        return (self.interface_with(address)
                or (self.interface_with(self.reached_at) if self.reached_at else None)
                or self.interface(self.default_route))
