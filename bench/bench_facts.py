"""Benchmark (on demand, not a test): gathering facts from 8, 32 and 64 simulated hosts with
preflight and with the tools users would otherwise pick, side by side in one run.

    sudo .venv/bin/python bench/bench_facts.py [--sizes 8,32,64] [--reps 5]
        [--tools-venv /opt/preflight-bench] [--out bench-facts.json]

Needs root (network namespaces), Debian's pdsh, and a virtual environment with ansible-core,
pyinfra and paramiko (--tools-venv; `python3 -m venv V && V/bin/pip install ansible-core
pyinfra paramiko`). preflight runs as a user gets it: `pip install` of this checkout into a
fresh virtual environment made with the tools' own interpreter (bytecode written by pip, as
for the other tools), its `preflight` command with the defaults (no --forks, no
--no-progress) and a YAML inventory that names each host's training python. Every command is a
whole process started from the client namespace, with cold SSH connections (no
ControlMaster), against the same hosts; the tools take turns within each repetition so that a
load spike hits them all alike. Prints a table (min and median of the repetitions) and the
ratios of the targets, and writes everything as JSON."""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from preflight.hostside import ship
from preflight.testing import testbed

# One session per host with paramiko, running a command (`true`): what any SSH fan-out
# costs at least. With `python3 -S -c pass`: what any fan-out of a Python probe costs.
FLOOR = r"""
import sys, threading, paramiko
key, kh, user, command = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
addrs = sys.argv[5:]
pkey = paramiko.Ed25519Key.from_private_key_file(key)
errors = []
def one(a):
    c = paramiko.SSHClient()
    try:
        c.load_host_keys(kh)
        c.set_missing_host_key_policy(paramiko.RejectPolicy())
        c.connect(a, username=user, pkey=pkey, allow_agent=False, look_for_keys=False,
                  timeout=30)
        _, out, _ = c.exec_command(command)
        out.channel.recv_exit_status()
    except Exception as e:
        errors.append(f"{a}: {e}")
    finally:
        c.close()
ts = [threading.Thread(target=one, args=(a,)) for a in addrs]
[t.start() for t in ts]
[t.join(60) for t in ts]
sys.exit(1 if errors else 0)
"""


class Bench:
    def __init__(self, tb: testbed.Testbed, venv: str, user_venv: str) -> None:
        self.tb = tb
        self.venv = venv
        self.user = user_venv  # preflight as a user installs it
        self.base = tb.base
        with open(os.path.join(self.base, "floor.py"), "w") as fh:
            fh.write(FLOOR)
        probe = ship.probe().encode()
        for h in tb.hosts.values():  # pdsh runs the probe where it lies (no upload step)
            with open(os.path.join(h.tmp, "pf-probe.py"), "wb") as fh:
                fh.write(probe)

    def files(self, names: Sequence[str]) -> dict[str, str]:
        """Writes each tool's inventory for these hosts; returns their paths."""
        tb, n = self.tb, len(names)
        tag = f"{n}"
        paths = {k: os.path.join(self.base, f"{k}-{tag}") for k in
                 ("preflight.yaml", "paddle.yaml", "ansible.ini", "pyinfra_inv.py",
                  "pdsh.hosts")}
        tb.inventory(paths["preflight.yaml"], names)
        tb.inventory(paths["paddle.yaml"], names, python=testbed.paddle_python("3.3.1"))
        with open(paths["ansible.ini"], "w") as fh:
            fh.write("[all]\n")
            for h in names:
                fh.write(f"{h} ansible_host={tb.hosts[h].address} ansible_user=root "
                         f"ansible_ssh_private_key_file={tb.identity} "
                         "ansible_python_interpreter=/usr/bin/python3\n")
        with open(paths["pyinfra_inv.py"], "w") as fh:
            data = {"ssh_user": "root", "ssh_key": tb.identity,
                    "ssh_known_hosts_file": tb.known_hosts,
                    "ssh_strict_host_key_checking": "yes"}
            hosts = [(h, dict(data, ssh_hostname=tb.hosts[h].address)) for h in names]
            fh.write(f"hosts = {hosts!r}\n")
        with open(paths["pdsh.hosts"], "w") as fh:
            fh.write("\n".join(tb.hosts[h].address for h in names) + "\n")
        return paths

    def commands(self, names: Sequence[str]) -> dict[str, list[str]]:
        """Returns {tool: argv} for these hosts (forks/parallelism = the host count)."""
        p, n, v = self.files(names), str(len(names)), self.venv
        pf = [f"{self.user}/bin/preflight", "check", "--no-network-tests", "-i",
              p["paddle.yaml"]]  # each host's training python named, as users write it
        return {
            "preflight --no-paddle": [*pf, "--no-paddle"],
            "preflight (Paddle on)": pf,
            "ssh floor (paramiko, true)": self.floor("true", names),
            "ssh + python3 -S -c pass": self.floor("python3 -S -c pass", names),
            "pyinfra fact server.Os": [f"{v}/bin/pyinfra", p["pyinfra_inv.py"], "fact",
                                       "server.Os", "--parallel", n, "-y"],
            "pyinfra exec true": [f"{v}/bin/pyinfra", p["pyinfra_inv.py"], "exec",
                                  "--parallel", n, "-y", "--", "true"],
            # The floor the targets are set against: a Python started on every host by a
            # real fan-out tool.
            "pyinfra exec python3 -S -c pass": [
                f"{v}/bin/pyinfra", p["pyinfra_inv.py"], "exec", "--parallel", n, "-y", "--",
                "python3", "-S", "-c", "pass"],
            "pdsh -R ssh probe": ["pdsh", "-R", "ssh", "-f", n, "-w", f"^{p['pdsh.hosts']}",
                                  "python3 /tmp/pf-probe.py --no-paddle --sample 0.1"],
            "ansible -m setup": [f"{v}/bin/ansible", "all", "-i", p["ansible.ini"], "-m",
                                 "setup", "-f", n],
        }

    def floor(self, command: str, names: Sequence[str]) -> list[str]:
        return [f"{self.venv}/bin/python", os.path.join(self.base, "floor.py"),
                self.tb.identity, self.tb.known_hosts, "root", command,
                *(self.tb.hosts[h].address for h in names)]

    def env(self) -> dict[str, str]:
        ssh = (f"-o UserKnownHostsFile={self.tb.known_hosts} -o StrictHostKeyChecking=yes "
               f"-o BatchMode=yes -o ControlMaster=no -o ControlPath=none")
        return dict(os.environ, PYTHONSAFEPATH="1", ANSIBLE_SSH_ARGS=ssh,
                    ANSIBLE_HOST_KEY_CHECKING="True", ANSIBLE_STDOUT_CALLBACK="oneline",
                    ANSIBLE_LOCAL_TEMP=os.path.join(self.base, "ansible-tmp"),
                    PDSH_SSH_ARGS=f"-i {self.tb.identity} -l root {ssh} -x %h",
                    HOME=self.base)

    def time(self, argv: list[str]) -> tuple[float, float, float, int, str]:
        """Returns wall seconds, the CPU seconds the whole machine spent meanwhile (the
        controller and every simulated host share it), the tool's own CPU seconds, its exit
        and the tail of its output."""
        busy0, own0 = machine_busy_s(), children_cpu_s()
        t0 = time.perf_counter()
        p = subprocess.run(self.tb.client_cmd(argv), capture_output=True, text=True,
                           timeout=600, cwd=self.base, env=self.env())
        wall = time.perf_counter() - t0
        return (wall, machine_busy_s() - busy0, children_cpu_s() - own0, p.returncode,
                (p.stderr or p.stdout)[-300:])


def user_install(tools_venv: str, where: str) -> str:
    """A fresh virtual environment with this checkout installed by pip (not editable), made
    with the interpreter the other tools run on; returns its directory."""
    base = subprocess.run([f"{tools_venv}/bin/python", "-c",
                           "import sys; print(sys._base_executable)"],
                          capture_output=True, text=True, check=True).stdout.strip()
    venv = os.path.join(where, "preflight-user")
    subprocess.run([base, "-m", "venv", venv], check=True)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run([f"{venv}/bin/pip", "install", "-q", "--disable-pip-version-check", root],
                   check=True)
    return venv


def machine_busy_s() -> float:
    """CPU seconds this machine has spent busy since boot (all cores; /proc/stat)."""
    with open("/proc/stat") as fh:
        vals = [int(x) for x in fh.readline().split()[1:8]]
    return (sum(vals) - vals[3]) / os.sysconf("SC_CLK_TCK")


def children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="8,32,64")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--tools-venv", default="/opt/preflight-bench")
    ap.add_argument("--skip", default="", help="comma-separated tools to leave out")
    ap.add_argument("--out", default="bench-facts.json")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    if not shutil.which("pdsh"):
        print("pdsh missing: apt-get install pdsh", file=sys.stderr)
        return 2
    results: dict[str, dict[str, Any]] = {}
    with testbed.Testbed(max(sizes)) as tb:
        bench = Bench(tb, args.tools_venv, user_install(args.tools_venv, tb.base))
        names = list(tb.hosts)
        for n in sizes:
            cmds = {k: v for k, v in bench.commands(names[:n]).items()
                    if k not in args.skip.split(",")}
            runs: dict[str, list[float]] = {k: [] for k in cmds}
            busy: dict[str, list[float]] = {k: [] for k in cmds}
            own: dict[str, list[float]] = {k: [] for k in cmds}
            codes: dict[str, set[int]] = {k: set() for k in cmds}
            for _ in range(args.reps):
                for tool, argv in cmds.items():
                    wall, machine, mine, rc, tail = bench.time(argv)
                    runs[tool].append(wall)
                    busy[tool].append(machine)
                    own[tool].append(mine)
                    codes[tool].add(rc)
                    if rc not in (0, 1):
                        print(f"  {tool} at {n} hosts exited {rc}: {tail}", file=sys.stderr)
            results[str(n)] = {t: {"min_s": min(r), "median_s": statistics.median(r),
                                   "runs_s": [round(x, 3) for x in r],
                                   "machine_cpu_s": statistics.median(busy[t]),
                                   "tool_cpu_s": statistics.median(own[t]),
                                   "exit_codes": sorted(codes[t])} for t, r in runs.items()}
            print(f"\n{n} hosts ({args.reps} repetitions; CPU: medians, in CPU-seconds)")
            for tool, r in results[str(n)].items():
                print(f"  {tool:<28} min {r['min_s']:6.2f} s   median {r['median_s']:6.2f} s"
                      f"   machine CPU {r['machine_cpu_s']:5.2f}   tool CPU "
                      f"{r['tool_cpu_s']:5.2f}   exit {r['exit_codes']}")
    ratios = _ratios(results)
    for k, v in ratios.items():
        print(f"{k}: {v:.2f}")
    with open(args.out, "w") as fh:
        json.dump({"sizes": sizes, "reps": args.reps, "results": results, "ratios": ratios,
                   "machine": {"cpus": os.cpu_count()}}, fh, indent=2)
    print(f"written: {args.out}")
    return 0


def _ratios(results: dict[str, dict[str, Any]]) -> dict[str, float]:
    """The targets' ratios, on medians, at the largest and smallest sizes measured."""
    big, small = results[max(results, key=int)], results[min(results, key=int)]
    pf = "preflight --no-paddle"
    out = {}
    if pf in big:
        m = big[pf]["median_s"]
        for other, key in (("pyinfra fact server.Os", "preflight / pyinfra fact"),
                           ("pyinfra exec python3 -S -c pass",
                            "preflight / pyinfra python floor"),
                           ("ansible -m setup", "ansible setup / preflight"),
                           ("ssh floor (paramiko, true)", "preflight / ssh floor"),
                           ("ssh + python3 -S -c pass", "preflight / python floor")):
            if other in big:
                o = big[other]["median_s"]
                out[key] = o / m if key.startswith("ansible") else m / o
        if pf in small and small is not big:
            out[f"preflight scaling {max(results, key=int)}/{min(results, key=int)} hosts"] = \
                m / small[pf]["median_s"]
    return out


if __name__ == "__main__":
    sys.exit(main())
