"""The probe's network sections into facts: interfaces, addresses, RDMA ports, the
kernel's neighbour tables, the TCP ports listened on."""

from __future__ import annotations

import ipaddress
from typing import Any, Optional

from preflight.collect.fields import MAX_STR, Malformed, i, items, obj, req, s
from preflight.model import facts as F


def network(d: dict[str, Any]) -> F.NetworkFacts:
    out = []
    for n, raw in enumerate(items(d.get("interfaces"), "interfaces")):
        x = obj(raw, f"interfaces[{n}]")
        addrs = tuple(a[:MAX_STR] for a in items(x.get("addresses", []), "addresses")
                      if isinstance(a, str))
        out.append(F.Interface(name=req(s(x, "name")), mtu=i(x, "mtu", False),
                               state=s(x, "state", False), speed_mbps=i(x, "speed_mbps", False),
                               addresses=addrs))
    route = d.get("default_route")
    ib = d.get("infiniband")
    return F.NetworkFacts(
        interfaces=tuple(out),
        default_route=route[:64] if isinstance(route, str) else None,
        infiniband=tuple(x[:64] for x in items(ib, "infiniband") if isinstance(x, str))
        if isinstance(ib, list) else (),
        reached_at=_ip(d.get("reached_at")), ib_ports=_ib_ports(d.get("ib_ports")),
        **_neighbours(d.get("neighbours")))


def _neighbours(v: Any) -> dict[str, Any]:
    """The neighbour tables, or why they were not read (a section error; an older probe's
    absence says so too)."""
    if v is None:
        return {"neighbours": None, "neighbours_error": "not reported by the probe"}
    if isinstance(v, dict) and "error" in v:
        return {"neighbours": None, "neighbours_error": str(v["error"])[:MAX_STR]}
    out = []
    try:  # a malformed table is this part's error, not the whole network section's
        for n, raw in enumerate(items(v, "neighbours")):
            x = obj(raw, f"neighbours[{n}]")
            out.append(F.NeighbourTable(req(s(x, "family"))[:8], req(i(x, "thresh1")),
                                        req(i(x, "thresh2")), req(i(x, "thresh3")),
                                        i(x, "entries", False), i(x, "table_id", False),
                                        i(x, "table_fulls", False)))
    except Malformed as e:
        return {"neighbours": None, "neighbours_error": f"malformed: {e}"}
    return {"neighbours": tuple(out), "neighbours_error": None}


def _ib_ports(v: Any) -> tuple[F.IbPort, ...]:
    """A section error or an older probe's absence: no ports known."""
    if not isinstance(v, list):
        return ()
    out = []
    for n, raw in enumerate(items(v, "ib_ports")):
        x = obj(raw, f"ib_ports[{n}]")
        rate = s(x, "rate", False)
        try:  # "200 Gb/sec (4X HDR)"
            gbps: Optional[float] = float(rate.split()[0]) if rate else None
        except ValueError:
            gbps = None
        out.append(F.IbPort(req(s(x, "device"))[:64], i(x, "port", False) or 0,
                            s(x, "state", False), gbps, s(x, "link_layer", False)))
    return tuple(out)


def _ip(v: Any) -> Optional[str]:
    """An IP address as the probe reported it, or None (anything else is ignored)."""
    if not isinstance(v, str):
        return None
    try:
        return str(ipaddress.ip_address(v.split("%")[0]))
    except ValueError:
        return None


def ports(d: dict[str, Any]) -> F.PortsFacts:
    raw = d.get("tcp")
    if not isinstance(raw, list) or len(raw) > 65536:
        raise Malformed("tcp: expected a list of at most 65536 ports")
    if not all(isinstance(p, int) and 0 <= p < 65536 for p in raw):
        raise Malformed("tcp: every port must be an integer 0-65535")
    return F.PortsFacts(tcp=tuple(sorted(set(raw))))
