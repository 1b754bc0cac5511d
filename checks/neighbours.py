"""The kernel's neighbour table (ARP, IPv6 neighbours) can hold the job's mesh: an entry for
every peer on the job's network, on every host, within gc_thresh3."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Optional

from preflight.checks.common import job_interfaces, passed
from preflight.common.units import hostlist
from preflight.model.cluster import Cluster
from preflight.model.facts import Interface, NeighbourTable, NetworkFacts
from preflight.model.findings import Finding, Status

NAME = "neighbours"
ABOUT = r"""
Every rank reaches the others (gloo's full mesh, NCCL's bootstrap, a PS job's trainers and
servers), and each peer on the job's subnet takes an entry in the host's neighbour table. Past
`gc_thresh3` (1024 by default) the kernel logs "neighbour table overflow" and new connections
fail or time out: a cluster of a thousand hosts on one flat network meets it with the default
limits, and so do hosts that share one kernel (containers, network namespaces: one table,
one limit, for all of them). Judged per table, before any connection is tried: the entries the
job needs (a peer each, plus the host's own others: its gateway, name servers, storage) against
gc_thresh3 (fail) and gc_thresh2 (warn: entries past it are reclaimed within seconds of going
idle, and a mesh that pauses resolves again).
"""
WHY = ("Past the limit the kernel drops new neighbours: the job's connections to some ranks "
       "fail or time out, which reads as a firewall or a hung rendezvous.")
FIX = ("Raise the limits above the job's need, on every host (`sysctl -w "
       "net.ipv4.neigh.default.gc_thresh3=N net.ipv4.neigh.default.gc_thresh2=N/2 "
       "net.ipv4.neigh.default.gc_thresh1=N/8`, and net.ipv6 for IPv6; kept in "
       "/etc/sysctl.d/)")
LIMITS: tuple[str, ...] = ()
OTHERS = 16  # entries a host needs besides its peers: gateway, name servers, storage, ...


def _family(iface: Optional[Interface]) -> str:
    """The table the job's traffic uses: ARP for an IPv4 job interface, else ND."""
    for a in iface.addresses if iface else ():
        if not a.startswith("fe80:"):
            return "ipv6" if ":" in a else "ipv4"
    return "ipv4"


def _networks(iface: Optional[Interface]) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    out = []
    for a in iface.addresses if iface else ():
        try:
            net = ipaddress.ip_interface(a).network
        except ValueError:
            continue
        if not net.is_link_local and not net.is_loopback:
            out.append(net)
    return out


def _address(iface: Optional[Interface], fallback: str,
             ) -> Optional[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The host's address on the job's network: its job interface's, else the inventory's
    (None: a name, and no interface known)."""
    candidates = [a.split("/")[0] for a in iface.addresses] if iface else []
    for a in [*candidates, fallback]:
        try:
            ip = ipaddress.ip_address(a)
        except ValueError:
            continue
        if not ip.is_link_local and not ip.is_loopback:
            return ip
    return None


def peers_on_subnet(ifaces: Mapping[str, Optional[Interface]], addresses: Mapping[str, str],
                    ) -> dict[str, int]:
    """{host: the other hosts its neighbour table holds an entry for}: those on its job
    interface's subnet (one the gateway's entry covers: counted in OTHERS); every other host
    where the subnet is not known."""
    ips = {h: _address(ifaces.get(h), addresses.get(h, "")) for h in addresses}

    def held(ip: Optional[ipaddress.IPv4Address | ipaddress.IPv6Address],
             nets: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]) -> bool:
        return not nets or ip is None or any(ip in n for n in nets)

    # Counted once for each set of subnets (hosts of one cluster share a few): host by host,
    # 5,000 hosts took 50 million address tests (80 s).
    held_by: dict[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...], int] = {}
    out = {}
    for host in ifaces:
        nets = tuple(_networks(ifaces[host]))
        if nets not in held_by:
            held_by[nets] = sum(1 for ip in ips.values() if held(ip, nets))
        out[host] = held_by[nets] - (1 if host in ips and held(ips[host], nets) else 0)
    return out


def check(cluster: Cluster) -> Iterator[Finding]:
    ifaces, unread = job_interfaces(NAME, cluster)
    yield from unread
    addresses = {o.host.name: o.host.address for o in cluster.outcomes}
    peers = peers_on_subnet(ifaces, addresses)
    tables: dict[tuple[object, ...], list[tuple[str, NeighbourTable]]] = {}
    for host, facts in cluster.probed():
        net = facts.network
        if not isinstance(net, NetworkFacts) or host not in ifaces:
            continue
        table = net.neighbour_table(_family(ifaces[host]))
        if net.neighbours is None and net.neighbours_error is None:
            # Facts of an older preflight (a results log, a baseline): nothing to judge.
            yield Finding(NAME, Status.SKIP, (host,), f"{host}: n/a: its facts hold no "
                          "neighbour table (recorded by an older preflight)", {})
            continue
        if table is None:
            why = net.neighbours_error or f"no {_family(ifaces[host])} table reported"
            yield Finding(NAME, Status.COULD_NOT_CHECK, (host,),
                          f"{host}: could not read its neighbour table: {why}", {"reason": why})
            continue
        # Hosts reporting one table id share one kernel: one table, one limit for all.
        key = (table.family, table.table_id) if table.table_id is not None else (host,)
        tables.setdefault(key, []).append((host, table))
    ok: list[str] = []
    for members in tables.values():
        finding = _judge(members, peers)
        if finding is None:
            ok += [h for h, _ in members]
        else:
            yield finding
    if ok:
        most = max((peers.get(h, 0) for h in ok), default=0)
        yield passed(NAME, ok, f"neighbour tables hold the job's mesh ({most} peers a host) "
                     "within gc_thresh2 on {n} hosts".replace("{n}", str(len(ok))))


def too_small(cluster: Cluster) -> set[str]:
    """The hosts whose neighbour table this check fails (it cannot hold the job's mesh):
    what times out between them is the table's doing, not a firewall's."""
    return {h for f in check(cluster) if f.status is Status.FAIL for h in f.hosts}


def _judge(members: Sequence[tuple[str, NeighbourTable]], peers: Mapping[str, int],
           ) -> Optional[Finding]:
    hosts = [h for h, _ in members]
    table = members[0][1]
    need = sum(peers.get(h, 0) + (OTHERS if i == 0 else 1) for i, h in enumerate(hosts))
    shared = (f"the one {table.family} table they share (one kernel)"
              if len(hosts) > 1 else f"{hosts[0]}'s {table.family} table")
    data = {"need": need, "thresh1": table.thresh1, "thresh2": table.thresh2,
            "thresh3": table.thresh3, "entries": table.entries,
            "table_fulls": table.table_fulls, "shared_by": hosts,
            "sysctl": _sysctls(need, table.family)}
    what = (f"the job's mesh needs {need} entries in {shared} ("
            + ("a peer each" if len(hosts) == 1 else "a peer for each host's every peer")
            + " and the hosts' own others)")
    if need > table.thresh3:
        return Finding(NAME, Status.FAIL, tuple(hosts),
                       f"{hostlist(hosts)}: neighbour table too small: {what}, past "
                       f"gc_thresh3 {table.thresh3}: connections to some ranks will fail or "
                       f"time out; {data['sysctl']}", data)
    if need > table.thresh2:
        return Finding(NAME, Status.WARN, tuple(hosts),
                       f"{hostlist(hosts)}: {what}, past gc_thresh2 {table.thresh2} (of "
                       f"gc_thresh3 {table.thresh3}): entries are reclaimed within seconds of "
                       f"going idle; {data['sysctl']}", data)
    # (table_fulls counts since boot: an overflow of last month is no evidence of today's.)
    return None


def _sysctls(need: int, family: str) -> str:
    """The sysctl line that fits the need twice over (a power of two, as the defaults)."""
    top = max(1024, 1 << math.ceil(math.log2(2 * need)))
    v = "ipv6" if family == "ipv6" else "ipv4"
    return (f"sysctl -w net.{v}.neigh.default.gc_thresh3={top} "
            f"net.{v}.neigh.default.gc_thresh2={top // 2} "
            f"net.{v}.neigh.default.gc_thresh1={top // 8}")
