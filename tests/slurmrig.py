"""A real Slurm on the simulated cluster: one munged, a slurmctld in a network namespace of its
own on the testbed's bridge, and one slurmd per simulated host, inside that host's network,
mount and UTS namespaces and its cgroups (so its jobs see the host's /tmp and /root, and a CPU
quota on the host applies to them). Debian's slurm-wlm and munge; nothing starts by itself.

Every wait is bounded; close() stops what this module started (the testbed's own close()
removes the namespaces and whatever still runs in them)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from typing import Optional

from preflight.testing.testbed import Testbed

DAEMONS = ("/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged", "/usr/bin/srun")
CTL_HOST = "ctl"
WAIT_S = 30.0

CONF = """\
ClusterName=preflight
SlurmctldHost={ctl}({ctl_addr})
AuthType=auth/munge
AuthInfo=socket={socket}
SlurmUser=root
SlurmdUser=root
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool/%n
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd-%n.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
SchedulerParameters=batch_sched_delay=0
MpiDefault=none
SlurmdTimeout=10
MessageTimeout=5
{nodes}
PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def can_run() -> Optional[str]:
    """Why a real Slurm cannot run here, or None."""
    for tool in DAEMONS:
        if not os.path.exists(tool):
            return f"{tool} is missing (apt-get install slurm-wlm munge; scripts/setup.sh)"
    return None


class Slurm:
    """Slurm over the hosts of a testbed; `env` is what srun, sbatch and scontrol need."""

    def __init__(self, tb: Testbed, names: Optional[Sequence[str]] = None) -> None:
        why = can_run()
        if why:
            raise RuntimeError(f"cannot start Slurm: {why}")
        self.tb = tb
        self.names = list(names or tb.hosts)
        self.dir = os.path.join(tb.base, "slurm")
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.socket = os.path.join(self.dir, "munge", "munge.socket")
        self.ctl_ns = f"pf{tb.id}-ctl"
        self.ctl_address = f"{tb.subnet}.3"
        self.munged: Optional[subprocess.Popen[bytes]] = None
        self.slurmctld: Optional[subprocess.Popen[bytes]] = None
        self.slurmd: dict[str, subprocess.Popen[bytes]] = {}
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    @property
    def env(self) -> dict[str, str]:
        return dict(os.environ, SLURM_CONF=self.conf)

    # ------------------------------------------------------------------ starting
    def _start(self) -> None:
        for sub in ("state", "spool", "munge"):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        for name in self.names:
            os.makedirs(os.path.join(self.dir, "spool", name), exist_ok=True)
        self._start_munge()
        nodes = "\n".join(
            f"NodeName={n} NodeAddr={self.tb.hosts[n].address} NodeHostname={n} CPUs=2 "
            "RealMemory=1000 State=UNKNOWN" for n in self.names)
        with open(self.conf, "w") as fh:
            fh.write(CONF.format(ctl=CTL_HOST, ctl_addr=self.ctl_address, socket=self.socket,
                                 dir=self.dir, nodes=nodes))
        self.tb._netns(self.ctl_ns)
        self.tb._plug(self.ctl_ns, "vctl", self.ctl_address)
        log = open(os.path.join(self.dir, "slurmctld.out"), "ab")
        # slurmctld checks that its hostname is SlurmctldHost's: a UTS namespace of its own.
        self.slurmctld = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{self.ctl_ns}", "unshare", "--uts", "--", "sh",
             "-c", f'hostname {CTL_HOST} && exec slurmctld -D -i -f "$0"', self.conf],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        for name in self.names:
            self.start_slurmd(name)
        self.wait_idle(self.names)

    def _start_munge(self) -> None:
        mdir = os.path.join(self.dir, "munge")
        key = os.path.join(mdir, "munge.key")
        with open(key, "wb") as fh:
            fh.write(os.urandom(1024))
        shutil.chown(mdir, "munge", "munge")
        shutil.chown(key, "munge", "munge")
        os.chmod(key, 0o400)
        os.chmod(mdir, 0o755)  # "Socket is inaccessible" otherwise
        # Every directory above the socket must be searchable by the munge user.
        os.chmod(self.dir, 0o755)
        os.chmod(self.tb.base, 0o755)
        self.munged = subprocess.Popen(
            ["setpriv", "--reuid=munge", "--regid=munge", "--clear-groups", "--",
             "munged", "-F", f"--socket={self.socket}", f"--key-file={key}",
             f"--pid-file={mdir}/munged.pid", f"--log-file={mdir}/munged.log",
             f"--seed-file={mdir}/munged.seed"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.monotonic() + WAIT_S
        while not os.path.exists(self.socket):
            if time.monotonic() > end or self.munged.poll() is not None:
                raise RuntimeError(f"munged did not start (see {mdir}/munged.log)")
            time.sleep(0.05)

    def start_slurmd(self, name: str) -> None:
        """Starts the node's slurmd in its host's namespaces and cgroups."""
        host = self.tb.hosts[name]
        assert host.sshd is not None, f"{name}: its sshd holds the namespaces slurmd joins"
        log = open(os.path.join(self.dir, f"slurmd-{name}.out"), "ab")
        p = subprocess.Popen(["nsenter", "-t", str(host.sshd.pid), "-n", "-m", "-u", "--",
                              "slurmd", "-D", "-N", name, "-f", self.conf],
                             stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        self.tb._into_cgroups(host, p.pid)
        self.slurmd[name] = p

    def stop_slurmd(self, name: str) -> None:
        """Stops the node's slurmd (Slurm marks the node not responding, then down)."""
        _stop(self.slurmd.pop(name, None))

    # ------------------------------------------------------------------ asking
    def cmd(self, argv: Sequence[str]) -> list[str]:
        """argv run from the testbed's client namespace (where preflight runs)."""
        return self.tb.client_cmd(list(argv))

    def run(self, *argv: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.cmd(argv), capture_output=True, text=True, timeout=timeout,
                              env=self.env)

    def states(self) -> Mapping[str, str]:
        """{node: its state as sinfo prints it, e.g. idle, drain, down*}."""
        p = self.run("sinfo", "-h", "-N", "-o", "%N %t")
        out = {}
        for line in p.stdout.splitlines():
            parts = line.split()
            if len(parts) == 2:
                out[parts[0]] = parts[1]
        return out

    def reason(self, name: str) -> str:
        p = self.run("scontrol", "show", "node", name)
        for field in p.stdout.split():
            if field.startswith("Reason="):
                return field[len("Reason="):]
        return ""

    def wait_idle(self, names: Sequence[str], timeout: float = WAIT_S) -> None:
        """Waits until every named node is idle (bounded)."""
        end = time.monotonic() + timeout
        states: Mapping[str, str] = {}
        while time.monotonic() < end:
            states = self.states()
            if all(states.get(n) == "idle" for n in names):
                return
            time.sleep(0.2)
        raise RuntimeError(f"Slurm nodes not idle within {timeout:.0f} s: {dict(states)} "
                           f"(logs in {self.dir})")

    def wait_state(self, name: str, prefix: str, timeout: float = 60.0) -> str:
        """Waits until the node's state starts with prefix; returns it (bounded)."""
        end = time.monotonic() + timeout
        state = ""
        while time.monotonic() < end:
            state = self.states().get(name, "")
            if state.startswith(prefix):
                return state
            time.sleep(0.5)
        raise RuntimeError(f"{name}: state {state!r}, not {prefix}* within {timeout:.0f} s")

    def drain(self, name: str, reason: str) -> None:
        p = self.run("scontrol", "update", f"nodename={name}", "state=drain", f"reason={reason}")
        if p.returncode != 0:
            raise RuntimeError(f"scontrol drain {name}: {p.stderr.strip()}")

    # ------------------------------------------------------------------ stopping
    def close(self) -> None:
        for name in list(self.slurmd):
            self.stop_slurmd(name)
        for p in (self.slurmctld, self.munged):
            _stop(p)


def _stop(p: Optional[subprocess.Popen[bytes]]) -> None:
    """TERM, then KILL if it has not ended within WAIT_S."""
    if p is not None and p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=WAIT_S)
