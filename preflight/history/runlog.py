"""The results log: one JSON line per thing a run learns, appended as it learns it, so that a
run killed outright (kill -9, OOM, a lost CI runner) loses nothing it had: `preflight report
LOG` judges what the log holds.

Records, in order: start (the command line, the hosts), host (one per host: the probe's own
output, or why there is none), link (one per iperf3 run), network (the active tests' summary,
all-reduce included), end (the verdict). A line cut by the kill is ignored on reading."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Optional, TypeVar

from preflight.collect.parse import ProbeOutputError, parse_probe_output
from preflight.common import safewrite
from preflight.common.plain import jsonable
from preflight.common.secrets import scrub
from preflight.common.statedir import stamped, state_dir
from preflight.config.errors import InputError
from preflight.config.typed import Mismatch, convert
from preflight.model.host import (
    Host,
    HostFailure,
    HostOutcome,
    SshTarget,
    Stage,
    Via,
    target_of,
)
from preflight.model.measure import LinkRun, NetworkTests, Schedule

T = TypeVar("T")
LOG_VERSION = 1
KEEP = 20  # logs kept in the default directory; older ones are removed
MAX_LINE = 16 << 20  # a host record holds one probe output (at most 4 MiB) and some JSON


def default_dir() -> str:
    """$XDG_STATE_HOME/preflight/runs (~/.local/state/preflight/runs)."""
    return state_dir("runs")


def new_path(directory: str, started: float) -> str:
    return stamped(directory, started)


def open_for_run(path: Optional[str], command: str, argv: Sequence[str], hosts: Sequence[Host],
                 started: float, inventory: Optional[str]) -> Optional[RunLog]:
    """Starts a run's results log (path, else a new one in the default directory), after
    saying which earlier runs were killed before they finished; None where no log can go
    (the run still runs: it only loses its insurance)."""
    directory = os.path.dirname(os.path.abspath(path)) if path else default_dir()
    try:
        for killed in killed_runs(directory, only=path):
            where = mark_killed(killed.path, move_aside=bool(path))
            answered = sum(1 for o in killed.outcomes.values() if o.ok)
            print(f"preflight: an earlier run was stopped before it finished ("
                  f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(killed.started_at))}, "
                  f"{killed.command}, {answered} of {len(killed.hosts)} hosts answered); "
                  f"what it learned: preflight report {where}", file=sys.stderr)
        if path and os.path.exists(path):
            os.unlink(path)  # a finished run's log, as --json replaces its report
        log = RunLog(path or new_path(directory, started))
        if not path:
            prune(directory)
    except OSError as e:
        print(f"preflight: warning: no results log ({e.strerror or e}: "
              f"{getattr(e, 'filename', None) or directory})", file=sys.stderr)
        return None
    log.start(command, argv, hosts, started, inventory)
    return log


class RunLog:
    """Appends records to the log; each record is one write(2) of one line, so a kill can
    cut at most the line being written. Threads (hosts answering at once) share it."""

    def __init__(self, path: str) -> None:
        self.path = path
        os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
        # 0600: facts name hosts, users and paths; the probe already redacts secrets.
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o600)
        self.lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        # Its secrets hidden (common/secrets.py), as in every report: results logs get shared.
        data = (json.dumps(scrub(record), separators=(",", ":"), default=str) + "\n").encode()
        with self.lock:
            if self.fd < 0:
                return
            view = memoryview(data)
            while view:  # a regular file takes it in one go; the loop is for the odd case
                view = view[os.write(self.fd, view):]

    def start(self, command: str, argv: Sequence[str], hosts: Sequence[Host],
              started: float, inventory: Optional[str]) -> None:
        self.write({"kind": "start", "log_version": LOG_VERSION, "command": command,
                    "argv": list(argv), "cwd": os.getcwd(), "started_at": started,
                    "pid": os.getpid(),
                    "controller": socket.gethostname(), "inventory": inventory,
                    "hosts": [host_record(h) for h in hosts]})

    def host(self, outcome: HostOutcome) -> None:
        rec: dict[str, Any] = {"kind": "host", "name": outcome.host.name,
                               "elapsed_s": outcome.elapsed_s,
                               "received_at": outcome.received_at,
                               "sent_at": outcome.sent_at}
        if outcome.ok:
            rec["probe"] = outcome.probe_output
        elif outcome.failure is not None:
            rec["failure"] = {"stage": outcome.failure.stage.value,
                              "reason": outcome.failure.reason}
        self.write(rec)

    def link(self, run: LinkRun) -> None:
        self.write({"kind": "link", **jsonable(run)})

    def network(self, net: NetworkTests) -> None:
        # The links went one by one as they were measured: the summary does not repeat them.
        self.write({"kind": "network",
                    **{k: v for k, v in jsonable(net).items() if k != "links"}})

    def end(self, verdict: str, exit_code: int) -> None:
        self.write({"kind": "end", "verdict": verdict, "exit": exit_code, "at": time.time()})

    def close(self) -> None:
        with self.lock:
            if self.fd >= 0:
                os.close(self.fd)
                self.fd = -1


@dataclass
class LoggedRun:
    """What a log holds, typed again."""

    path: str
    command: str
    argv: list[str]
    started_at: float
    pid: int
    controller: str
    inventory: Optional[str]
    hosts: list[Host]
    cwd: Optional[str] = None  # where it ran (its command line's relative paths start there)
    outcomes: dict[str, HostOutcome] = field(default_factory=dict)
    links: list[LinkRun] = field(default_factory=list)
    network: Optional[NetworkTests] = None
    end: Optional[dict[str, Any]] = None

    @property
    def finished(self) -> bool:
        return self.end is not None

    def network_tests(self) -> Optional[NetworkTests]:
        """The active tests as far as they got: the summary if they finished, else the
        links measured before the run stopped (marked interrupted)."""
        if self.network is not None:
            return self.network
        if not self.links:
            return None
        hosts = tuple(dict.fromkeys([r.sender for r in self.links] +
                                    [r.receiver for r in self.links]))
        schedule: Schedule = "matrix" if "--network-matrix" in self.argv else "ring"
        return NetworkTests(schedule, hosts, tuple(self.links), None,
                            "the run stopped before the all-reduce", {}, True)


def is_log(path: str) -> bool:
    """True when path starts like a results log (a start record), not a JSON report."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
    except OSError:
        return False
    return head.startswith(b'{"kind":"start"')


def read(path: str) -> LoggedRun:
    """Reads a results log; raises InputError (one line) when it is not one."""
    try:
        with open(path, "rb") as fh:
            lines = fh.read().split(b"\n")
    except OSError as e:
        raise InputError(path, f"cannot read: {e.strerror or e}") from None
    records: list[tuple[int, dict[str, Any]]] = []
    cut: Optional[int] = None  # a line the kill cut short: only end records may follow it
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw) if len(raw) <= MAX_LINE else None
        except ValueError:
            rec = None
        if not isinstance(rec, dict):
            if cut is not None:
                raise InputError(path, "not a JSON record", line=cut)
            cut = i + 1
            continue
        if cut is not None and rec.get("kind") != "end":
            raise InputError(path, "not a JSON record", line=cut)
        records.append((i + 1, rec))
    if not records or records[0][1].get("kind") != "start":
        raise InputError(path, "not a preflight results log (no start record)")
    return _typed(path, records)


@dataclass(frozen=True)
class _Start:
    """The start record: the command line and the hosts (read by _host: their shape changed
    across releases)."""

    command: str
    argv: tuple[str, ...]
    started_at: float
    pid: int
    controller: str
    inventory: Optional[str] = None
    hosts: tuple[Mapping[str, Any], ...] = ()
    cwd: Optional[str] = None  # None: a log from before it was kept


@dataclass(frozen=True)
class _Answer:
    """A host record: the probe's own output, or why there is none."""

    name: str
    elapsed_s: float = 0.0
    received_at: float = 0.0
    sent_at: float = 0.0  # 0: a log from before it was kept
    probe: Optional[str] = None
    failure: Optional[HostFailure] = None


def _typed(path: str, records: list[tuple[int, dict[str, Any]]]) -> LoggedRun:
    """The records as types, each read by config.typed; a record that does not fit is one
    InputError naming the line and the field."""
    _, first = records[0]
    if first.get("log_version") != LOG_VERSION:
        raise InputError(path, f"log_version {first.get('log_version')!r} is not "
                         f"{LOG_VERSION} (written by another preflight release)")
    start = _record(_Start, first, path, 1)
    try:
        hosts = [_host(h) for h in start.hosts]
    except Mismatch as e:
        raise InputError(path, f"bad start record (hosts: {e.field}: {e.why})", line=1) from None
    run = LoggedRun(path, start.command, list(start.argv), start.started_at, start.pid,
                    start.controller, start.inventory, hosts, start.cwd)
    by_name = {h.name: h for h in hosts}
    for line, rec in records[1:]:
        kind = rec.get("kind")
        if kind == "host":
            answer = _record(_Answer, rec, path, line)
            host = by_name.get(answer.name)
            if host is None:
                raise InputError(path, f"bad host record (host {answer.name!r} is not in the "
                                 "start record)", line=line)
            try:
                run.outcomes[host.name] = _outcome(host, answer)
            except ProbeOutputError as e:
                raise InputError(path, f"bad host record ({e})", line=line) from None
        elif kind == "link":
            run.links.append(_record(LinkRun, rec, path, line))
        elif kind == "network":
            run.network = replace(_record(NetworkTests, rec, path, line),
                                  links=tuple(run.links))
        elif kind == "end":
            run.end = rec
    return run


def _record(cls: type[T], rec: dict[str, Any], path: str, line: int) -> T:
    try:
        return convert(cls, rec)
    except Mismatch as e:
        what = rec.get("kind", "start")
        raise InputError(path, f"bad {what} record ({e.field}: {e.why})", line=line) from None


def host_record(h: Host) -> dict[str, Any]:
    """A host as the log keeps it: its fields, its target's, and which kind of target (via)."""
    return {**jsonable(h), "via": h.via.value}


def _host(d: Mapping[str, Any]) -> Host:
    """A host as a log recorded it, its target read by its via. Logs of earlier releases kept
    the SSH target as `ssh` (earlier, its fields beside the others, one identity_file and
    one known_hosts file) and a `local` flag: they read the same."""
    d = dict(d)
    target = d.pop("target", None)
    if isinstance(target, dict) and isinstance(target.get("ssh"), dict):  # a Slurm node's
        target = target["ssh"]
    ssh = dict(target or d.pop("ssh", None)
               or {k: d[k] for k in _SSH_FIELDS_OF_OLD if k in d})
    if "identity_file" in ssh:
        one = ssh.pop("identity_file")
        ssh.setdefault("identity_files", [one] if one else [])
    if isinstance(ssh.get("known_hosts"), str):
        ssh["known_hosts"] = [ssh["known_hosts"]]
    for key in ("identity_files", "known_hosts", "jump"):
        ssh[key] = ssh.get(key) or []
    via = Via.LOCAL if d.pop("local", False) else convert(Via, d.pop("via", None) or "ssh")
    way = convert(SshTarget, {**ssh, "jump": []})
    host = convert(Host, {k: v for k, v in d.items() if k not in _SSH_FIELDS_OF_OLD})
    jump = tuple(_host(j) for j in ssh["jump"])
    return replace(host, target=target_of(via, replace(way, jump=jump)))


_SSH_FIELDS_OF_OLD = ("user", "port", "identity_file", "identity_files", "known_hosts", "jump",
                      "host_key_alias", "hash_known_hosts", "connect_timeout")


def _outcome(host: Host, a: _Answer) -> HostOutcome:
    if a.probe is not None:
        facts = parse_probe_output(a.probe, received_at=a.received_at, sent_at=a.sent_at)
        return HostOutcome(host, facts=facts, elapsed_s=a.elapsed_s, received_at=a.received_at,
                           sent_at=a.sent_at, probe_output=a.probe)
    failure = a.failure or HostFailure(Stage.CONNECT, "the log has no answer")
    return HostOutcome(host, failure=failure, elapsed_s=a.elapsed_s)


def killed_runs(directory: str, only: Optional[str] = None) -> list[LoggedRun]:
    """Logs in directory (or just the log `only`) of runs that never wrote their end record
    and whose process is gone (or ran on another machine): the runs that were killed."""
    out = []
    here = socket.gethostname()
    if only is not None:
        paths = [only] if os.path.exists(only) else []
    else:
        names = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
        paths = [os.path.join(directory, n) for n in names if n.endswith(".jsonl")]
    for path in paths:
        if _ends(path):  # most logs: known finished from their last line, without parsing
            continue
        try:
            run = read(path)
        except InputError:
            continue
        if run.finished or (run.controller == here and _alive(run.pid)):
            continue
        out.append(run)
    return out


def _ends(path: str) -> bool:
    """True when the log's last line is an end record."""
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, os.path.getsize(path) - 4096))
            tail = fh.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    except OSError:
        return False
    return tail.startswith((b'{"kind":"end"', b'{"kind": "end"'))


def mark_killed(path: str, move_aside: bool = False) -> str:
    """Ends a killed run's log with a record saying so (so it is announced once), and moves
    it aside when a new run is about to write at its path; returns where it now is."""
    with safewrite.open_append(path) as fh:
        fh.write("\n" + json.dumps({"kind": "end", "verdict": None, "killed": True,
                                    "noticed_at": time.time()}) + "\n")
    if not move_aside:
        return path
    stamp = time.strftime("%Y%m%dT%H%M%S")
    aside = f"{path}.stopped-{stamp}"
    os.replace(path, aside)
    return aside


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def prune(directory: str, keep: int = KEEP) -> None:
    """Removes all but the newest `keep` logs of the default directory."""
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".jsonl"))
    except OSError:
        return
    for name in names[:-keep] if keep > 0 else names:
        try:
            os.unlink(os.path.join(directory, name))
        except OSError:
            pass
