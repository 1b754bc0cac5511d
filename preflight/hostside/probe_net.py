# The probe's network part: interfaces, addresses, MTU and speed, the default route, RDMA
# ports, the kernel's neighbour tables and the TCP ports listened on, asked of the kernel over
# rtnetlink and sock_diag (no child process, hostside/netlink.py), else of /proc and `ip`.
# Joined into the probe (hostside/ship.py): standard library only, Python 3.6 syntax.
import os
import struct

# One import a line (the alias keeps isort from merging them): the join drops lines.
from preflight.hostside.netlink import NETLINK_ROUTE as NETLINK_ROUTE  # joined
from preflight.hostside.netlink import netlink_dump as netlink_dump  # joined
from preflight.hostside.netlink import rt_attributes  # joined
from preflight.hostside.procfs import read as read  # joined
from preflight.hostside.procfs import section as section  # joined
from preflight.hostside.procfs import tcp_rows  # joined


def ip_addresses():
    """Addresses per interface, as `ip -j addr` gives them: from the kernel over rtnetlink
    (no child process), else from `ip -j addr` itself."""
    try:
        return netlink_addresses()
    except Exception:
        pass
    import json
    import subprocess
    out = subprocess.check_output(["ip", "-j", "addr", "show"], stderr=subprocess.DEVNULL,
                                  timeout=5)
    result = {}
    for link in json.loads(out.decode("utf-8", "replace")):
        result[link.get("ifname")] = [
            "%s/%s" % (a.get("local"), a.get("prefixlen")) for a in link.get("addr_info", [])
        ]
    return result


RTM_GETADDR = 22
IFA_ADDRESS, IFA_LOCAL = 1, 2
NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY, TCP_LISTEN = 4, 20, 10


def netlink_addresses():
    """One RTM_GETADDR dump over rtnetlink: {interface: ["address/prefix", ...]}."""
    import _socket
    af_inet, af_inet6 = _socket.AF_INET, _socket.AF_INET6
    names = dict(_socket.if_nameindex())
    # nlmsghdr (len, type, flags REQUEST|DUMP, seq, pid) + ifaddrmsg for every family
    request = struct.pack("=IHHII", 24, RTM_GETADDR, 0x301, 1, 0) + bytes(8)
    by_index = {}  # type: dict
    for kind, msg in netlink_dump(NETLINK_ROUTE, request):
        if kind != 20 or len(msg) < 8:  # RTM_NEWADDR
            continue
        family, prefix, _, _, index = struct.unpack_from("=BBBBI", msg, 0)
        attrs = rt_attributes(msg, 8)
        raw = attrs.get(IFA_LOCAL, attrs.get(IFA_ADDRESS))
        if raw is not None and family in (af_inet, af_inet6):
            addr = _socket.inet_ntop(family, raw)
            by_index.setdefault(index, []).append("%s/%d" % (addr, prefix))
    return dict((names.get(i, str(i)), a) for i, a in by_index.items())


def netlink_listening():
    """Ports of listening TCP sockets (IPv4 and IPv6), asked of the kernel by state over
    NETLINK_SOCK_DIAG (what `ss -lt` does): reading /proc/net/tcp walks the whole TCP hash
    table, 4.5 ms a file on a machine with a large one, most of the probe's own CPU."""
    import _socket
    ports = set()
    for family in (_socket.AF_INET, _socket.AF_INET6):
        # nlmsghdr + inet_diag_req_v2 (family, protocol, ext, pad, states, a zero sockid)
        req = struct.pack("=BBBxI", family, _socket.IPPROTO_TCP, 0, 1 << TCP_LISTEN) + \
            bytes(48)
        head = struct.pack("=IHHII", 16 + len(req), SOCK_DIAG_BY_FAMILY, 0x301, 1, 0)
        for kind, msg in netlink_dump(NETLINK_SOCK_DIAG, head + req):
            # inet_diag_msg: family, state, timer, retrans, then the sockid (sport first)
            if kind == SOCK_DIAG_BY_FAMILY and len(msg) >= 6 and msg[1] == TCP_LISTEN:
                ports.add(struct.unpack_from(">H", msg, 4)[0])
    return ports


RTM_GETNEIGHTBL, RTM_NEWNEIGHTBL = 66, 64
NEIGH_FAMILIES = {2: "ipv4", 10: "ipv6"}  # AF_INET's arp_cache, AF_INET6's ndisc_cache


def neighbour_tables():
    """The kernel's neighbour tables (ARP, IPv6 neighbours) over rtnetlink, as `ip -s ntable`
    shows them: limits (gc_thresh1-3), entries, how often it was full, and its hash seed, a
    random number per table that tells hosts sharing one kernel (namespaces, containers:
    one table, one limit) apart from hosts with their own. Read in a network namespace too,
    where /proc/sys has no neigh/default."""
    request = struct.pack("=IHHII", 20, RTM_GETNEIGHTBL, 0x301, 1, 0) + bytes(4)
    out = []
    for kind, msg in netlink_dump(NETLINK_ROUTE, request):
        if kind != RTM_NEWNEIGHTBL or len(msg) < 4 or msg[0] not in NEIGH_FAMILIES:
            continue
        attrs = rt_attributes(msg, 4)
        if not all(k in attrs and len(attrs[k]) >= 4 for k in (2, 3, 4)):
            continue  # a device's parameters, not the table's
        config, stats = attrs.get(5, b""), attrs.get(7, b"")
        out.append({
            "family": NEIGH_FAMILIES[msg[0]],
            "thresh1": struct.unpack_from("=I", attrs[2])[0],
            "thresh2": struct.unpack_from("=I", attrs[3])[0],
            "thresh3": struct.unpack_from("=I", attrs[4])[0],
            "entries": struct.unpack_from("=I", config, 4)[0] if len(config) >= 8 else None,
            "table_id": struct.unpack_from("=I", config, 16)[0] if len(config) >= 20 else None,
            "table_fulls": struct.unpack_from("=Q", stats, 80)[0] if len(stats) >= 88
            else None,
        })
    return out


def network_facts():
    addrs = section(ip_addresses)
    interfaces = []
    base = "/sys/class/net"
    for name in sorted(os.listdir(base)):
        d = os.path.join(base, name)

        def attr(n, d=d):
            try:
                return read(os.path.join(d, n)).strip()
            except OSError:  # speed raises EINVAL on links without one
                return None
        mtu, speed = attr("mtu"), attr("speed")
        interfaces.append({
            "name": name,
            "mtu": int(mtu) if mtu and mtu.isdigit() else None,
            "state": attr("operstate"),
            "speed_mbps": int(speed) if speed and speed.lstrip("-").isdigit()
            and int(speed) > 0 else None,
            "addresses": addrs.get(name, []) if isinstance(addrs, dict)
            and "error" not in addrs else [],
        })
    return {"interfaces": interfaces, "default_route": section(default_route_interface),
            "infiniband": section(infiniband_devices), "ib_ports": section(infiniband_ports),
            "reached_at": reached_at(), "neighbours": section(neighbour_tables)}


def reached_at():
    """The address SSH reached this host at (sshd's SSH_CONNECTION: client ip, port, server
    ip, port): the host's own address on the cluster's network, also through a bastion and
    when the controller cannot resolve the host's name."""
    parts = os.environ.get("SSH_CONNECTION", "").split()
    return parts[2] if len(parts) == 4 else None


def listening_ports():
    try:
        return {"tcp": sorted(netlink_listening())}
    except Exception:
        pass  # no sock_diag (an old or locked-down kernel): the files, slower
    ports = set()
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = tcp_rows(path, 8 << 20)
        except OSError:
            continue
        for parts in rows:
            if len(parts) > 3 and parts[3] == "0A":  # TCP_LISTEN
                ports.add(int(parts[1].rsplit(":", 1)[1], 16))
    return {"tcp": sorted(ports)}


def default_route_interface():
    for line in read("/proc/net/route").splitlines()[1:]:
        parts = line.split()
        if len(parts) > 2 and parts[1] == "00000000":
            return parts[0]
    return None


def infiniband_devices():
    try:
        return sorted(os.listdir("/sys/class/infiniband"))
    except OSError:
        return []


def infiniband_ports(root="/sys/class/infiniband"):
    """Every RDMA port: its state ("4: ACTIVE"), rate ("200 Gb/sec (4X HDR)") and link layer
    (InfiniBand, or Ethernet for RoCE), as the kernel shows them to any user."""
    def attr(path):
        try:
            return read(path, 256).strip() or None
        except OSError:
            return None
    out = []  # type: list
    try:
        devices = sorted(os.listdir(root))
    except OSError:
        return out
    for dev in devices[:64]:
        try:
            ports = sorted(os.listdir(os.path.join(root, dev, "ports")),
                           key=lambda p: int(p) if p.isdigit() else 0)
        except OSError:
            continue
        for port in ports[:16]:
            base = os.path.join(root, dev, "ports", port)
            state = attr(os.path.join(base, "state"))
            out.append({"device": dev, "port": int(port) if port.isdigit() else 0,
                        "state": state.split(":", 1)[-1].strip() if state else None,
                        "rate": attr(os.path.join(base, "rate")),
                        "link_layer": attr(os.path.join(base, "link_layer"))})
    return out

