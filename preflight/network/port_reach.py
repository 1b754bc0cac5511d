"""Port reach: the ports the plan reserves on each host, reached from every other host of the
plan as the job's processes will reach them (a trainer its servers, every rank the launcher's
master). A host firewall that lets SSH through and drops the rest passes every local check
and hangs the job at its first connection: only a connection across tells.

A listener on each host binds its plan's ports (the ports check found them free) for a
bounded time; then each host connects to the ports it will use in the job: in a collective
job every other host's (the ranks' mesh and the master); in a PS job its servers' and the
rendezvous (gloo) port, as a trainer or a server does. Connections in flight are bounded on
each host (MAX_IN_FLIGHT), each connection too (CONNECT_S). A connection that timed out is
tried again, alone with the others that did, within RETRY_S, before it is reported: a timeout
is a firewall only when it holds (a full neighbour table, a busy listener's backlog, a
dropped SYN time out once). Measures only; checks/ports.py judges.

The listeners hold the very ports the job's processes bind next (the all-reduce's master
among them): each is stopped by the run's token in its command line, whatever became of its
channel, and is gone before this returns."""

from __future__ import annotations

import functools
import json
import math
import re
import secrets
import shlex
from collections.abc import Mapping
from typing import Optional

from preflight.common.remote import Remote, Started, in_parallel
from preflight.hostside import ship
from preflight.model.measure import PortReach
from preflight.model.plan import Plan
from preflight.network.paddle_job import kill_matching

READY = "PREFLIGHT-LISTENING"
REACH = "PREFLIGHT-REACH "
CONNECT_S = 3.0  # a connection not made in this long is dropped on the way (or retried)
RETRY_S = 10.0  # a timed-out connection's second try: alone, and with this long
MAX_IN_FLIGHT = 32  # connections a host has open at once (a listener's backlog is 64)
LISTEN_S = 10.0  # from starting a listener to its ready line
LIFETIME_S = 60.0  # a listener ends by itself after this long, whatever becomes of us


def listener_command(python: str, ports: tuple[int, ...], token: str) -> str:
    q = shlex.quote
    # hostside's port_listener: its token is found by the stop, its lifetime is its own.
    inner = shlex.join(ship.inline(python, "port_listener", token, f"{LIFETIME_S:g}",
                                   *(str(p) for p in ports)))
    return "sh -c " + q(f"exec timeout {LIFETIME_S + 5:g} {inner}")


def stop_command(python: str, token: str) -> str:
    """Stops the run's listener on a host (and the `timeout` around it), found by the token
    in its command line, and returns once it is gone. `[x]` keeps the stopping command's
    own line from matching its pattern."""
    return kill_matching(python, f"[{token[0]}]{re.escape(token[1:])}", "SIGTERM,gone,SIGKILL")


def connector_command(python: str, endpoints: list[str], timeout: float = CONNECT_S,
                      most: int = MAX_IN_FLIGHT) -> str:
    """hostside's port_connector: prints {endpoint: null (reached) or why not}."""
    return shlex.join(ship.inline(python, "port_connector", f"{timeout:g}", str(most),
                                  *endpoints))


def bound_s(n: int, timeout: float, most: int) -> float:
    """How long a connector of n endpoints, most at once, may take: its waves of timeouts."""
    return timeout * math.ceil(max(n, 1) / most) + 10


def job_pairs(plan: Plan) -> dict[str, list[tuple[str, int]]]:
    """{host: the (host, port) pairs its processes connect to in the job}. Collective: every
    other host's ports (the ranks' mesh, the master). PS: its servers' ports and the
    rendezvous port, from every host but the one holding them (trainers reach servers; every
    rank reaches gloo's rendezvous); the trainers' own ports are bound, not connected to."""
    hosts = [n.host for n in plan.nodes if n.ports]
    if plan.mode != "ps":
        return {src: [(n.host, p) for n in plan.nodes if n.host != src for p in n.ports]
                for src in hosts}
    taken = {(e.host, e.port) for e in (*plan.servers, *plan.workers)}
    serving = [(e.host, e.port) for e in plan.servers]
    rendezvous = [(n.host, p) for n in plan.nodes for p in n.ports if (n.host, p) not in taken]
    return {src: [(h, p) for h, p in (*serving, *rendezvous) if h != src] for src in hosts}


def run_port_reach(plan: Plan, remotes: Mapping[str, Remote], pythons: Mapping[str, str],
                   roles: Mapping[str, str]) -> tuple[PortReach, ...]:
    """Every plan host's ports, each reached from the plan's other hosts (a host with no
    other host to reach it from, or none of the plan, is left out)."""
    nodes = [n for n in plan.nodes if n.host in remotes and n.host in pythons and n.ports]
    if len(nodes) < 2:
        return ()
    token = f"preflight-listen-{secrets.token_hex(8)}"
    procs: dict[str, Started] = {}  # the listeners started, by host
    started: dict[str, Optional[str]] = {}  # host -> None once it listens, else why not

    def listen(host: str, ports: tuple[int, ...]) -> None:
        started[host] = _listen(remotes[host], pythons[host], ports, token, procs, host)

    try:
        # Every host's listener at once: one round trip for the plan, not one per host.
        in_parallel([functools.partial(listen, n.host, n.ports) for n in nodes],
                    LISTEN_S + 10, "port-listen")
        errors = {n.host: started.get(n.host) or f"the listener did not start within "
                  f"{LISTEN_S:g} s" for n in nodes if started.get(n.host, "") is not None}
        address = {n.host: _bracketed(n.address) for n in nodes}
        pairs = job_pairs(plan)
        targets = {n.host: [f"{address[n.host]}:{p}" for p in n.ports]
                   for n in nodes if n.host not in errors}
        wanted = {src: [f"{address[h]}:{p}" for h, p in pairs.get(src, ())
                        if h in targets] for src in address}
        seen: dict[str, dict[str, Optional[str]]] = {}
        untried: dict[str, str] = {}  # a host whose connections could not be made at all
        retried: dict[str, list[str]] = {}  # src -> endpoints that answered only on a retry

        def connect(src: str, eps: list[str], timeout: float, most: int) -> None:
            if not eps:
                return
            try:
                done = remotes[src].run(connector_command(pythons[src], eps, timeout, most),
                                        timeout=bound_s(len(eps), timeout, most))
                got, said = _reach_doc(done.stdout), done.tail()
            except Exception as e:
                got, said = None, f"{type(e).__name__}: {e}"
            if got is None:  # not a port's answer: nothing to blame a port or a firewall for
                untried.setdefault(src, f"could not try the other hosts' ports from it: "
                                        f"{said or 'no answer'}")
            else:
                seen.setdefault(src, {}).update(got)

        most = max(len(e) for e in wanted.values()) if wanted else 0
        in_parallel([functools.partial(connect, src, eps, CONNECT_S, MAX_IN_FLIGHT)
                     for src, eps in wanted.items()],
                    bound_s(most, CONNECT_S, MAX_IN_FLIGHT) + 5, "port-reach")
        # A timeout is tried again, the timed-out alone and fewer at once, before it counts.
        again = {src: [e for e, why in got.items() if why == "timed out"]
                 for src, got in seen.items()}
        again = {src: eps for src, eps in again.items() if eps}
        if again:
            first = {src: dict(seen[src]) for src in again}
            most = max(len(e) for e in again.values())
            in_parallel([functools.partial(connect, src, eps, RETRY_S, 8)
                         for src, eps in again.items()], bound_s(most, RETRY_S, 8) + 5,
                        "port-reach-retry")
            for src, eps in again.items():
                retried[src] = [e for e in eps if seen.get(src, {}).get(e) is None]
                for e in eps:  # still timed out: said as twice
                    if seen.get(src, {}).get(e) == "timed out" and first[src].get(e):
                        seen[src][e] = f"timed out twice (the second alone, {RETRY_S:g} s)"
    finally:
        _stop([n.host for n in nodes], remotes, pythons, procs, token)
    out = []
    for n in nodes:
        why = errors.get(n.host) or untried.get(n.host)
        if why:
            out.append(PortReach(n.host, n.ports, roles.get(n.host, ""), error=why))
            continue
        unreached: dict[str, str] = {}
        late: dict[str, str] = {}
        mine = targets.get(n.host, ())
        for src, results in seen.items():
            bad = {int(e.rsplit(":", 1)[1]): why for e, why in results.items()
                   if why and e in mine}
            if bad:
                unreached[src] = "; ".join(f"{p}: {why}" for p, why in sorted(bad.items()))
            slow = sorted(int(e.rsplit(":", 1)[1]) for e in retried.get(src, ()) if e in mine)
            if slow:
                late[src] = ", ".join(map(str, slow))
        reached_from = tuple(sorted(src for src, eps in wanted.items()
                                    if any(e in mine for e in eps) and src in seen))
        out.append(PortReach(n.host, n.ports, roles.get(n.host, ""), unreached=unreached,
                             retried=late, reached_from=reached_from))
    return tuple(out)


def _listen(remote: Remote, python: str, ports: tuple[int, ...], token: str,
            procs: dict[str, Started], host: str) -> Optional[str]:
    """Starts the host's listener; None once it listens on every port, else why not."""
    try:
        proc: Started = remote.start(listener_command(python, ports, token))
    except Exception as e:
        return f"could not start a listener: {e}"
    procs[host] = proc
    ready = proc.read_until(READY, LISTEN_S)
    out = proc.output() if ready else proc.wait(0).stdout or proc.output()
    unbound = re.findall(r"PREFLIGHT-BIND (\d+) (.*)", out)
    if unbound:
        return "could not listen on " + "; ".join(f"{p}: {why}" for p, why in unbound)
    if not ready:
        return f"the listener did not start within {LISTEN_S:g} s"
    return None


def _stop(hosts: list[str], remotes: Mapping[str, Remote], pythons: Mapping[str, str],
          procs: Mapping[str, Started], token: str) -> None:
    """Stops the listener of every host, started, still starting or whose channel is gone: by
    its token, not by its channel (a connection lost and opened again, a command read as
    ended, would otherwise leave the ports held until its lifetime ends)."""
    def one(host: str) -> None:
        try:
            remotes[host].run(stop_command(pythons[host], token), timeout=8.0)
        except Exception:
            pass  # the host is gone: the listener's own lifetime ends it
        proc = procs.get(host)
        if proc is not None:
            proc.close()

    in_parallel([functools.partial(one, h) for h in hosts], 10.0, "port-stop")


def _reach_doc(stdout: str) -> Optional[dict[str, Optional[str]]]:
    for line in stdout.splitlines():
        if line.startswith(REACH):
            try:
                doc = json.loads(line[len(REACH):])
            except ValueError:
                return None
            return {str(k): (None if v is None else str(v)) for k, v in doc.items()} \
                if isinstance(doc, dict) else None
    return None


def _bracketed(address: str) -> str:
    return f"[{address}]" if ":" in address else address
