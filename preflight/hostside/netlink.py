# What the kernel says over netlink (no child process): one dump's messages, their
# attributes, and the queueing disciplines of the interfaces (what `tc -s qdisc` shows).
# Joined into the probe and the sampler (hostside/ship.py): standard library only, Python 3.6
# syntax.
import struct

NETLINK_ROUTE = 0  # one name an assignment: a joined part imports it by name
NLMSG_DONE, NLMSG_ERROR = 3, 2
RTM_NEWQDISC, RTM_GETQDISC = 36, 38
TCA_KIND, TCA_STATS, TCA_STATS2, TCA_STATS_QUEUE = 1, 3, 7, 3
TC_H_ROOT = 0xFFFFFFFF


def netlink_dump(protocol, request):
    """The messages of one netlink dump: [(type, payload)] until NLMSG_DONE. `_socket` is
    the C module under `socket`: the same calls without the ~4 ms of enum classes `socket`
    builds at import."""
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
