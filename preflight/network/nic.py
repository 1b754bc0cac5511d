"""A host's NIC error counters, read before and after the iperf3 tests, and what the NIC
negotiated -> what the counters added (no judging: checks/bandwidth.py does).

Retransmits alone cannot tell a bad cable from congestion: TCP finds a link's speed by
overflowing a queue, so a healthy link retransmits too. A NIC that counts CRC or frame
errors while it carries the tests has a physical fault (cable, transceiver, port); one that
counts missed or FIFO errors could not take the packets off its ring fast enough (the host's
CPU or ring size). Counters that reset or vanish between the two reads are left out."""

from __future__ import annotations

import functools
import shlex
from collections.abc import Mapping

from preflight.common.remote import Remote, in_parallel
from preflight.model.measure import NIC_DROPPED, NIC_OVERRUN, NIC_PHYSICAL, NicCounters

COUNTERS = NIC_PHYSICAL + NIC_OVERRUN + NIC_DROPPED
MARK = "PREFLIGHT-NIC "
READ_S = 10.0


def counters_command(interface: str) -> str:
    """Returns a command printing `MARK counter value` for each counter the NIC has."""
    d = "/sys/class/net/" + interface + "/statistics"
    script = (f"cd {shlex.quote(d)} 2>/dev/null || exit 3; for c in {' '.join(COUNTERS)}; do "
              f"[ -r \"$c\" ] && echo \"{MARK}$c $(cat \"$c\")\"; done; exit 0")
    return "sh -c " + shlex.quote(script)


def parse_counters(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for ln in text.splitlines():
        if ln.startswith(MARK):
            name, _, value = ln[len(MARK):].partition(" ")
            if name in COUNTERS and value.strip().isdigit():
                out[name] = int(value)
    return out


def read_all(remotes: Mapping[str, Remote], interfaces: Mapping[str, str],
             ) -> dict[str, dict[str, int]]:
    """Returns {host: {counter: value}} for the hosts whose job interface could be read."""
    got: dict[str, dict[str, int]] = {}

    def one(host: str) -> None:
        try:
            done = remotes[host].run(counters_command(interfaces[host]), timeout=READ_S)
        except Exception:
            return  # counters are context: a host that does not answer just has none
        if done.exit == 0:
            got[host] = parse_counters(done.stdout)

    in_parallel([functools.partial(one, h) for h in interfaces if h in remotes], READ_S + 2,
                "nic")
    return dict(got)


def grown(before: Mapping[str, Mapping[str, int]], after: Mapping[str, Mapping[str, int]],
          interfaces: Mapping[str, str]) -> dict[str, NicCounters]:
    """Returns, for every host read both times, the counters that grew and by how much."""
    out: dict[str, NicCounters] = {}
    for host, b in before.items():
        a = after.get(host)
        if a is None:
            continue
        grew = {c: a[c] - b[c] for c in COUNTERS if c in a and c in b and a[c] > b[c]}
        out[host] = NicCounters(interfaces[host], grew)
    return out
