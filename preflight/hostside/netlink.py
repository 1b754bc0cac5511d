# What the kernel says over netlink (no child process): one dump's messages, their
# attributes, the queueing disciplines of the interfaces (what `tc -s qdisc` shows), and
# the interfaces that traffic to given addresses leaves by (`ip route get`).
# Joined into the probe and the sampler (hostside/ship.py): standard library only, Python 3.6
# syntax.
import struct

NETLINK_ROUTE = 0  # one name an assignment: a joined part imports it by name
NLMSG_DONE, NLMSG_ERROR = 3, 2
RTM_NEWQDISC, RTM_GETQDISC = 36, 38
RTM_NEWLINK, RTM_GETLINK, RTM_NEWROUTE, RTM_GETROUTE = 16, 18, 24, 26
IFLA_IFNAME, IFLA_LINK, IFLA_MASTER, IFLA_LINKINFO, IFLA_INFO_KIND = 3, 5, 10, 18, 1
RTA_DST, RTA_OIF = 1, 4
# Interfaces whose traffic leaves by another of the host's: a VLAN or macvlan by the one it
# sits on (IFLA_LINK), a bond or team by its members (theirs name it as IFLA_MASTER). A
# bridge's members are not followed: they carry other guests' traffic too.
ON_LOWER = ("vlan", "macvlan", "ipvlan", "macvtap")
ON_MEMBERS = ("bond", "team")
TCA_KIND, TCA_STATS, TCA_STATS2, TCA_STATS_QUEUE = 1, 3, 7, 3
TC_H_ROOT = 0xFFFFFFFF


def netlink_dump(protocol, request, one=False):
    """The messages of one netlink dump: [(type, payload)] until NLMSG_DONE; one: the
    answer to a request that is no dump, its one message. `_socket` is the C module under
    `socket`: the same calls without the ~4 ms of enum classes `socket` builds at import."""
    import _socket
    s = _socket.socket(_socket.AF_NETLINK, _socket.SOCK_RAW, protocol)
    try:
        s.settimeout(2.0)
        s.bind((0, 0))
        s.sendto(request, (0, 0))
        out = []  # type: list
        for _ in range(10000):  # a dump ends with NLMSG_DONE; the bound guards a bad kernel
            data = s.recv(1 << 16)
            if not data:
                raise RuntimeError("netlink dump ended without NLMSG_DONE")
            pos = 0
            while pos + 16 <= len(data):
                length, kind = struct.unpack_from("=IH", data, pos)
                if length < 16:
                    raise RuntimeError("bad netlink message length %d" % length)
                if kind == NLMSG_DONE:
                    return out
                if kind == NLMSG_ERROR:
                    raise RuntimeError("netlink error %d" % struct.unpack_from("=i", data,
                                                                              pos + 16)[0])
                out.append((kind, data[pos + 16:pos + length]))
                if one:
                    return out
                pos += (length + 3) & ~3
        raise RuntimeError("netlink dump too long")
    finally:
        s.close()


def rt_attributes(msg, at):
    """{type: payload} of the route attributes of a message from offset at (the nested
    flag left out of the types)."""
    attrs = {}
    while at + 4 <= len(msg):
        alen, atype = struct.unpack_from("=HH", msg, at)
        if alen < 4:
            break
        attrs[atype & 0x3fff] = msg[at + 4:at + alen]
        at += (alen + 3) & ~3
    return attrs


def qdisc_stats():
    """Each interface's root queueing discipline, as `tc -s qdisc` shows it: {interface:
    [kind, packets held back over its rate so far (overlimits: a shaper such as tbf or htb
    counts them), bytes queued now (backlog), packets dropped so far]}."""
    import _socket
    names = dict(_socket.if_nameindex())
    # nlmsghdr (len, type, flags REQUEST|DUMP, seq, pid) + tcmsg (family, ifindex, handle,
    # parent, info): every interface's qdiscs
    request = struct.pack("=IHHII", 36, RTM_GETQDISC, 0x301, 1, 0) + \
        struct.pack("=BxxxiIII", 0, 0, 0, 0, 0)
    out = {}
    for kind, msg in netlink_dump(NETLINK_ROUTE, request):
        if kind != RTM_NEWQDISC or len(msg) < 20:
            continue
        index, parent = struct.unpack_from("=iI", msg, 4)[0], struct.unpack_from("=I", msg, 12)[0]
        if parent != TC_H_ROOT:
            continue  # a class's qdisc: its root's figures count it
        attrs = rt_attributes(msg, 20)
        queue = rt_attributes(attrs.get(TCA_STATS2, b""), 0).get(TCA_STATS_QUEUE, b"")
        if len(queue) >= 20:  # gnet_stats_queue: qlen, backlog, drops, requeues, overlimits
            _, backlog, drops, _, overlimits = struct.unpack_from("=IIIII", queue)
        elif len(attrs.get(TCA_STATS, b"")) >= 36:  # tc_stats, of older kernels
            drops, overlimits = struct.unpack_from("=II", attrs[TCA_STATS], 12)
            backlog = struct.unpack_from("=I", attrs[TCA_STATS], 32)[0]
        else:
            continue
        qkind = attrs.get(TCA_KIND, b"").split(b"\0")[0].decode("ascii", "replace")
        out[names.get(index, str(index))] = [qkind, overlimits, backlog, drops]
    return out


def route_interface(address):
    """The index of the interface the kernel sends IPv4 traffic to address by (`ip route
    get`), or None where its route says none; RuntimeError where it has no route."""
    import _socket
    dst = _socket.inet_aton(address)
    # nlmsghdr (len, type, flags REQUEST, seq, pid) + rtmsg (family AF_INET, dst_len 32,
    # src_len, tos, table, protocol, scope, type, flags) + RTA_DST
    request = struct.pack("=IHHII", 16 + 12 + 8, RTM_GETROUTE, 1, 1, 0) + \
        struct.pack("=BBBBBBBBI", 2, 32, 0, 0, 0, 0, 0, 0, 0) + \
        struct.pack("=HH", 8, RTA_DST) + dst
    for kind, msg in netlink_dump(NETLINK_ROUTE, request, one=True):
        oif = rt_attributes(msg, 12).get(RTA_OIF, b"") if kind == RTM_NEWROUTE else b""
        if len(oif) >= 4:
            return struct.unpack_from("=i", oif)[0]
    return None


def interface_links():
    """{index: (name, kind, lower index, master index)} of the host's interfaces: kind as
    `ip -d link` says it ("" for a plain NIC), the interface a VLAN or macvlan sits on, and
    the bond, team or bridge it is a member of (0 where none)."""
    request = struct.pack("=IHHII", 32, RTM_GETLINK, 0x301, 1, 0) + \
        struct.pack("=BxHiII", 0, 0, 0, 0, 0)
    out = {}
    for kind, msg in netlink_dump(NETLINK_ROUTE, request):
        if kind != RTM_NEWLINK or len(msg) < 16:
            continue
        index = struct.unpack_from("=i", msg, 4)[0]
        attrs = rt_attributes(msg, 16)
        info = rt_attributes(attrs.get(IFLA_LINKINFO, b""), 0)
        lower, master = attrs.get(IFLA_LINK, b""), attrs.get(IFLA_MASTER, b"")
        out[index] = (attrs.get(IFLA_IFNAME, b"").split(b"\0")[0].decode("ascii", "replace"),
                      info.get(IFLA_INFO_KIND, b"").split(b"\0")[0].decode("ascii", "replace"),
                      struct.unpack_from("=i", lower)[0] if len(lower) >= 4 else 0,
                      struct.unpack_from("=i", master)[0] if len(master) >= 4 else 0)
    return out


def carrying(indexes, links):
    """The names of the interfaces that traffic sent by the interfaces of indexes leaves by:
    those, the ones a VLAN or macvlan among them sits on, and the members of a bond or team
    among them, followed down a few levels (a VLAN on a bond)."""
    todo, seen = list(indexes), set()
    for _ in range(64):  # a few levels at most; the bound guards a loop in the links
        if not todo:
            break
        index = todo.pop()
        if index in seen or index not in links:
            continue
        seen.add(index)
        _, kind, lower, _ = links[index]
        if kind in ON_LOWER and lower:
            todo.append(lower)
        if kind in ON_MEMBERS:
            todo.extend(i for i, link in links.items() if link[3] == index)
    return sorted(links[i][0] for i in seen)
