"""Port reach: the ports the plan reserves on each host, reached from every other host of the
plan as the job's processes will reach them (a trainer its servers, every rank the launcher's
master). A host firewall that lets SSH through and drops the rest passes every local check
and hangs the job at its first connection: only a connection across tells.

A listener on each host binds its plan's ports (the ports check found them free) for a
bounded time; then every host connects to every other host's ports at once, each connection
bounded. Measures only; checks/ports.py judges.

The listeners hold the very ports the job's processes bind next (the all-reduce's master
among them): each is stopped by the run's token in its command line, whatever became of its
channel, and is gone before this returns."""

from __future__ import annotations

import functools
import json
import re
import secrets
import shlex
from collections.abc import Mapping
from typing import Optional

from preflight.common.remote import Remote, Started, in_parallel
from preflight.model.measure import PortReach
from preflight.model.plan import Plan
from preflight.network.allreduce_cmd import kill_matching

READY = "PREFLIGHT-LISTENING"
REACH = "PREFLIGHT-REACH "
CONNECT_S = 3.0  # a connection not made in this long is dropped on the way
LISTEN_S = 10.0  # from starting a listener to its ready line
LIFETIME_S = 60.0  # a listener ends by itself after this long, whatever becomes of us

# Binds every port given (all addresses, as the job's processes may), says which it could
# not, then accepts until its time is up, closing each connection after its peer did. Its
# argv: the run's token (found by the stop), its lifetime, the ports. Python 3.6+.
_LISTENER = """
import select, socket, sys, time
end = time.time() + float(sys.argv[2])
socks, conns = [], []
for p in sys.argv[3:]:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("", int(p)))
        s.listen(64)
    except OSError as e:
        print("PREFLIGHT-BIND %s %s" % (p, e), flush=True)
        continue
    socks.append(s)
print("PREFLIGHT-LISTENING", flush=True)
while socks and time.time() < end:
    for s in select.select(socks + conns, [], [], 0.5)[0]:
        try:
            if s in socks:
                conns.append(s.accept()[0])
            else:  # the peer closed first: no TIME_WAIT left on the port the job binds
                conns.remove(s)
                s.close()
        except OSError:
            pass
"""

# Connects to every address:port given at once, each within the timeout; prints
# {endpoint: null (reached) or why not}.
_CONNECTOR = """
import json, socket, sys, threading
t = float(sys.argv[1])
out = {}
def one(ep):
    a, p = ep.rsplit(":", 1)
    try:
        socket.create_connection((a.strip("[]"), int(p)), t).close()
        out[ep] = None
    except socket.timeout:
        out[ep] = "timed out"
    except ConnectionResetError:
        out[ep] = None  # something there answered
    except OSError as e:
        out[ep] = e.strerror or str(e)
ts = [threading.Thread(target=one, args=(e,)) for e in sys.argv[2:]]
for x in ts:
    x.start()
for x in ts:
    x.join(t + 2)
print("PREFLIGHT-REACH " + json.dumps(out))
"""


def listener_command(python: str, ports: tuple[int, ...], token: str) -> str:
    q = shlex.quote
    inner = " ".join([q(python), "-c", q(_LISTENER), q(token), f"{LIFETIME_S:g}",
                      *(str(p) for p in ports)])
    return "sh -c " + q(f"exec timeout {LIFETIME_S + 5:g} {inner}")


def stop_command(python: str, token: str) -> str:
    """Stops the run's listener on a host (and the `timeout` around it), found by the token
    in its command line, and returns once it is gone. `[x]` keeps the stopping command's
    own line from matching its pattern."""
    return kill_matching(python, f"[{token[0]}]{re.escape(token[1:])}", "SIGTERM,gone,SIGKILL")


def connector_command(python: str, endpoints: list[str]) -> str:
    q = shlex.quote
    return " ".join([q(python), "-c", q(_CONNECTOR), f"{CONNECT_S:g}",
                     *(q(e) for e in endpoints)])


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
        targets = {n.host: [f"{_bracketed(n.address)}:{p}" for p in n.ports]
                   for n in nodes if n.host not in errors}
        seen: dict[str, dict[str, Optional[str]]] = {}
        untried: dict[str, str] = {}  # a host whose connections could not be made at all

        def connect(src: str) -> None:
            eps = [e for h, es in targets.items() if h != src for e in es]
            if not eps:
                return
            try:
                done = remotes[src].run(connector_command(pythons[src], eps),
                                        timeout=CONNECT_S + 10)
                got, said = _reach_doc(done.stdout), done.tail()
            except Exception as e:
                got, said = None, f"{type(e).__name__}: {e}"
            if got is None:  # not a port's answer: nothing to blame a port or a firewall for
                untried[src] = f"could not try the other hosts' ports from it: " \
                    f"{said or 'no answer'}"
            else:
                seen[src] = got

        in_parallel([functools.partial(connect, n.host) for n in nodes],
                    CONNECT_S + 15, "port-reach")
    finally:
        _stop([n.host for n in nodes], remotes, pythons, procs, token)
    out = []
    for n in nodes:
        why = errors.get(n.host) or untried.get(n.host)
        if why:
            out.append(PortReach(n.host, n.ports, roles.get(n.host, ""), error=why))
            continue
        unreached: dict[str, str] = {}
        for src, results in seen.items():
            bad = {int(e.rsplit(":", 1)[1]): why for e, why in results.items()
                   if why and e in targets.get(n.host, ())}
            if bad:
                unreached[src] = "; ".join(f"{p}: {why}" for p, why in sorted(bad.items()))
        out.append(PortReach(n.host, n.ports, roles.get(n.host, ""), unreached=unreached))
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
