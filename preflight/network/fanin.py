"""Fan-in: a parameter server's host receiving from all its trainers' hosts at once, as a PS
job's pushes arrive. One iperf3 server per sender on the receiving host (an iperf3 server
serves one client at a time), on consecutive ports from the iperf3 port, then every client
at once; each server host in turn, so that no two fan-ins share a sender. Measures only;
checks/ps_fanin.py judges."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Optional

from preflight.common.remote import Remote, Started, in_parallel
from preflight.model.measure import FanIn, IperfResult
from preflight.model.plan import Plan
from preflight.network.iperf import (
    SLACK_S,
    IperfOptions,
    Servers,
    await_listening,
    run_client,
    server_command,
)


def fanin_pairs(plan: Plan) -> dict[str, tuple[str, ...]]:
    """{server host: the hosts of its trainers} for a PS plan: every trainer pushes to every
    server (the sparse table is sharded over them all); a trainer on the server's own host
    crosses no link and is left out."""
    trainers = tuple(dict.fromkeys(e.host for e in plan.workers))
    out: dict[str, tuple[str, ...]] = {}
    for e in plan.servers:
        senders = tuple(t for t in trainers if t != e.host)
        if senders:
            out.setdefault(e.host, senders)
    return out


def measure_fanin(receiver: str, senders: Sequence[str], remotes: Mapping[str, Remote],
                  address: str, opts: IperfOptions, servers: Servers) -> FanIn:
    """Returns what each sender delivered to receiver while all of them sent at once."""
    started: dict[str, tuple[Started, int]] = {}
    runs: dict[str, IperfResult] = {}
    try:
        for i, sender in enumerate(senders):
            port = opts.port + i
            try:
                proc = remotes[receiver].start(server_command(replace(opts, port=port)))
            except Exception as e:
                runs[sender] = IperfResult(error=f"could not start an iperf3 server on "
                                           f"{receiver}: {e}")
                continue
            started[sender] = (proc, servers.add(remotes[receiver], proc))
        for sender, (proc, key) in started.items():
            why = await_listening(proc, key, servers, receiver)
            if why:
                runs[sender] = IperfResult(error=why)
        ready = [s for s in started if s not in runs]

        def client(sender: str) -> None:
            port = opts.port + list(senders).index(sender)
            runs[sender] = run_client(remotes[sender], address, replace(opts, port=port))

        in_parallel([functools.partial(client, s) for s in ready],
                    opts.run_s + SLACK_S + 15, "fan-in")
    finally:
        for _, key in started.values():
            servers.stop(key)
    return FanIn(receiver, {s: runs.get(s) or IperfResult(error="no result in time")
                            for s in senders})


RETRIES = 2  # a fan-in below the threshold is measured again, this many times at most


def run_fanin(plan: Plan, remotes: Mapping[str, Remote], addresses: Mapping[str, str],
              opts: IperfOptions, suspect_below: Optional[float] = None) -> tuple[FanIn, ...]:
    """Every server host's fan-in, one server host after another. One that delivers less
    than suspect_below in all is measured again (alone, as every fan-in is) and its best
    kept: a moment of contention rarely repeats, a deficit does."""
    servers = Servers()
    out = []
    try:
        for receiver, senders in fanin_pairs(plan).items():
            if receiver not in remotes or any(s not in remotes for s in senders):
                continue  # a host the link tests had no connection to: said there
            best = measure_fanin(receiver, senders, remotes, addresses[receiver], opts, servers)
            for attempt in range(1, RETRIES + 1):
                if suspect_below is None or best.errors or \
                        (best.total_bps or 0.0) >= suspect_below:
                    break
                again = measure_fanin(receiver, senders, remotes, addresses[receiver], opts,
                                      servers)
                if not again.errors and (again.total_bps or 0.0) > (best.total_bps or 0.0):
                    best = again
                best = replace(best, attempts=attempt + 1)
            out.append(best)
    finally:
        servers.stop_all()
    return tuple(out)
