"""iperf3 between hosts: the commands, their `-J` output parsed, and rounds of disjoint pairs
run over open connections -> LinkRuns (no judging here).

Each pair: a one-shot server (`-s -1`) on the receiver, bounded by the host's `timeout`, then
the client on the sender with JSON output. A server that is still there after its pair (the
client never came, the run was interrupted) is killed by its PID over the same connection."""

from __future__ import annotations

import functools
import json
import re
import shlex
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Optional

from preflight.common.remote import MAX_OUTPUT, Remote, Started, in_parallel
from preflight.model.measure import IperfResult, LinkRun, Phase
from preflight.network.schedule import Pair, Round

LISTENING = "Server listening"
PID_MARK = "PREFLIGHT-PID"
NO_IPERF = "PREFLIGHT-NO-IPERF3"
SERVER_START_S = 5.0  # from starting a server to its "listening" line
SLACK_S = 10.0  # connect and teardown on top of the measured seconds


def _num(d: Any, key: str) -> Optional[float]:
    v = d.get(key) if isinstance(d, dict) else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def parse_iperf3(text: str) -> IperfResult:
    """Returns the result of one client run. iperf3 reports failures inside its JSON
    ("error"), and was seen to exit 0 while doing so: the JSON decides, not the exit code."""
    if len(text) > MAX_OUTPUT:
        return IperfResult(error=f"iperf3 output of {len(text)} bytes is over the limit")
    try:
        doc = json.loads(text)
    except ValueError:
        first = text.strip().splitlines()[0][:120] if text.strip() else "no output"
        return IperfResult(error=f"iperf3 output is not JSON: {first!r}")
    if not isinstance(doc, dict):
        return IperfResult(error="iperf3 output is not a JSON object")
    if doc.get("error"):
        return IperfResult(error=str(doc["error"])[:300])
    end = doc.get("end")
    sent = end.get("sum_sent") if isinstance(end, dict) else None
    received = end.get("sum_received") if isinstance(end, dict) else None
    if not isinstance(sent, dict) or not isinstance(received, dict):
        return IperfResult(error="iperf3 output has no end.sum_sent / end.sum_received")
    retr = sent.get("retransmits")
    start = doc.get("start")
    mss = _num(start, "tcp_mss_default")
    omit = _num(start.get("test_start") if isinstance(start, dict) else None, "omit")
    return IperfResult(sent_bps=_num(sent, "bits_per_second"),
                       received_bps=_num(received, "bits_per_second"),
                       retransmits=retr if isinstance(retr, int) else None,
                       seconds=_num(received, "seconds"), sent_bytes=_num(sent, "bytes"),
                       mss=int(mss) if mss else None,
                       warmup_s=None if omit is None else int(omit))


@dataclass(frozen=True)
class IperfOptions:
    port: int = 5201
    seconds: int = 3
    # Seconds measured first and left out (iperf3 -O, whole seconds only): TCP's slow start
    # and its first queue overflows, which a short run would count as the link's loss.
    omit: int = 1
    # Parallel streams (-P); 0: chosen per pair from what its NICs negotiated (streams_for).
    streams: int = 0

    def rate_only(self) -> IperfOptions:
        """These options for a run whose rate alone is judged (a retest, a fan-in): no
        warm-up left out, since its loss is not judged (the survey's is) and TCP reaches a
        LAN link's rate within milliseconds, well inside a run's first second."""
        return replace(self, omit=0)

    @property
    def run_s(self) -> int:
        """How long one client runs, omitted start included."""
        return self.seconds + self.omit


def _bounded(limit: float, argv: Sequence[str]) -> str:
    """Returns a shell snippet that runs argv under the host's `timeout` when it has one."""
    run = " ".join(shlex.quote(a) for a in argv)
    return (f"if command -v timeout >/dev/null 2>&1; then exec timeout -k 1 {int(limit)} {run}; "
            f"else exec {run}; fi")


def server_command(opts: IperfOptions) -> str:
    limit = SERVER_START_S + opts.run_s + SLACK_S
    # The PID first, so the server can be killed if it outlives its pair; --forceflush so the
    # "listening" line crosses a pipe at once.
    script = (f"command -v iperf3 >/dev/null 2>&1 || {{ echo {NO_IPERF}; exit 127; }}; "
              f"echo {PID_MARK} $$; "
              + _bounded(limit, ["iperf3", "-s", "-1", "-p", str(opts.port), "--forceflush"]))
    return "sh -c " + shlex.quote(script)


# One TCP stream is one core's work in iperf3 (single-threaded before 3.16): it tops out
# around 20-40 Gb/s, well short of a 100 Gb/s NIC, and would call every such link slow.
PARALLEL_FROM_MBPS = 25_000
AUTO_STREAMS = 4


def streams_for(sender_mbps: Optional[int], receiver_mbps: Optional[int],
                opts: IperfOptions) -> int:
    """Returns the streams a pair runs: as asked, else several where both NICs are fast
    enough that one stream could not fill the link, else one."""
    if opts.streams > 0:
        return opts.streams
    if sender_mbps and receiver_mbps and min(sender_mbps, receiver_mbps) >= PARALLEL_FROM_MBPS:
        return AUTO_STREAMS
    return 1


def client_command(address: str, opts: IperfOptions, streams: int = 1) -> str:
    limit = opts.run_s + SLACK_S
    omit = ["-O", str(opts.omit)] if opts.omit > 0 else []
    parallel = ["-P", str(streams)] if streams > 1 else []
    return "sh -c " + shlex.quote(_bounded(limit, [
        "iperf3", "-c", address, "-p", str(opts.port), "-t", str(opts.seconds), *omit,
        *parallel, "-J"]))


def kill_command(pid: int) -> str:
    """Ends a server and waits (2 s at most) until it is gone: its port is then free for
    what binds it next (the next round's server)."""
    p = int(pid)
    return (f"kill -TERM {p} 2>/dev/null; for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 "
            f"18 19 20; do kill -0 {p} 2>/dev/null || break; sleep 0.1; done; true")


class Servers:
    """The iperf3 servers started and not yet known to be gone; killed on demand."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.live: dict[int, tuple[Remote, Started, Optional[int]]] = {}

    def add(self, remote: Remote, proc: Started) -> int:
        with self.lock:
            key = id(proc)
            self.live[key] = (remote, proc, None)
            return key

    def set_pid(self, key: int, pid: int) -> None:
        with self.lock:
            remote, proc, _ = self.live[key]
            self.live[key] = (remote, proc, pid)

    def stop(self, key: int) -> None:
        with self.lock:
            entry = self.live.pop(key, None)
        if entry:
            _kill(*entry)

    def stop_all(self) -> None:
        with self.lock:
            entries, self.live = list(self.live.values()), {}
        for entry in entries:
            _kill(*entry)


def _kill(remote: Remote, proc: Started, pid: Optional[int]) -> None:
    """Kills a server still running. One whose command has ended is left alone: its PID is
    free, and the host may already have given it to another process (the user's own)."""
    try:
        if pid is not None and proc.wait(0).exit is None:
            remote.run(kill_command(pid), timeout=5.0)
    except Exception:
        pass  # the host may be gone; its `timeout` still ends the server
    proc.close()


def await_listening(proc: Started, key: int, servers: Servers, receiver: str) -> Optional[str]:
    """Waits for a server's "listening" line and records its PID; None once it listens,
    else why it does not."""
    listening = proc.read_until(LISTENING, SERVER_START_S)
    early = proc.wait(0) if not listening else None
    out = early.stdout if early else proc.output()
    match = re.search(rf"{PID_MARK} (\d+)", out)
    if match:
        servers.set_pid(key, int(match.group(1)))
    if listening:
        return None
    if NO_IPERF in out:
        return f"iperf3 is not installed on {receiver}"
    return f"iperf3 server on {receiver} did not start: " + (
        early.tail() if early and early.exit is not None
        else f"no 'listening' line within {SERVER_START_S:.0f} s")


def run_client(sender: Remote, address: str, opts: IperfOptions,
               streams: int = 1) -> IperfResult:
    """Runs one iperf3 client on sender against a listening server; returns its result."""
    done = sender.run(client_command(address, opts, streams), timeout=opts.run_s + SLACK_S + 2)
    if done.exit is None:
        return IperfResult(error=f"iperf3 client on {sender.name} did not finish within "
                           f"{opts.run_s + SLACK_S:.0f} s")
    if "command not found" in done.stderr or done.exit == 127:
        return IperfResult(error=f"iperf3 is not installed on {sender.name}")
    return replace(parse_iperf3(done.stdout), streams=streams)


def measure_pair(sender: Remote, receiver: Remote, address: str, opts: IperfOptions,
                 servers: Servers, streams: int = 1) -> IperfResult:
    """Returns the result of one iperf3 run from sender to receiver's address."""
    try:
        proc = receiver.start(server_command(opts))
    except Exception as e:
        return IperfResult(error=f"could not start the iperf3 server on {receiver.name}: {e}")
    key = servers.add(receiver, proc)
    try:
        why = await_listening(proc, key, servers, receiver.name)
        if why:
            return IperfResult(error=why)
        result = run_client(sender, address, opts, streams)
        if result.error is None:
            proc.wait(3.0)  # a one-shot server exits once its client has gone
        return result
    except Exception as e:  # a connection lost mid-pair is a failed measurement, not a crash
        return IperfResult(error=f"{type(e).__name__}: {e}")
    finally:
        servers.stop(key)


def run_rounds(rounds: Sequence[Round], remotes: Mapping[str, Remote],
               addresses: Mapping[str, str], opts: IperfOptions, phase: Phase,
               servers: Servers, on_run: Optional[Callable[[LinkRun], None]] = None,
               nic_mbps: Optional[Mapping[str, int]] = None) -> list[LinkRun]:
    """Returns one LinkRun per pair, round after round; pairs of a round run at once.
    nic_mbps: each host's negotiated NIC speed, where known (it picks the streams).

    Every pair is bounded by its own timeouts; the join below is bounded as well."""
    speeds = nic_mbps or {}
    runs: list[LinkRun] = []
    pair_limit = SERVER_START_S + opts.run_s + SLACK_S + 15

    def measure_into(results: dict[Pair, IperfResult], pair: Pair) -> None:
        s, r = pair
        results[pair] = measure_pair(remotes[s], remotes[r], addresses[r], opts, servers,
                                     streams_for(speeds.get(s), speeds.get(r), opts))

    for rnd in rounds:
        results: dict[Pair, IperfResult] = {}
        in_parallel([functools.partial(measure_into, results, p) for p in rnd], pair_limit,
                    "iperf")
        for pair in rnd:
            result = results.get(pair) or IperfResult(
                error=f"no result within {pair_limit:.0f} s")
            run = LinkRun(pair[0], pair[1], phase, result)
            runs.append(run)
            if on_run:
                on_run(run)
    return runs
