# preflight watch, the sampler: one long-lived process a host, started over the transport's
# one channel, that prints one JSON line a sample about the Paddle jobs running there.
#
# Shipped like the probe (hostside/ship.py joins it after the parts its "# joined" lines
# import: procfs, cgroup, stephook, sampler_rank, gpu and sampler_gpu, and sends the text in
# its command line), so: standard library only, Python 3.6 syntax, each
# part of a sample guarded so that a failure is an "error" there, never a crash. It decides
# nothing; the controller judges. It ends by itself: at its lifetime, or at the first line
# it cannot write (the controller is gone and the channel with it).
#
# A job is a process running paddle.distributed.launch (with the launch marker, when one is
# given) and its ranks are its descendants that carry Paddle's rank variables (the first on
# each branch: a rank's children are its own). Everything is read from /proc as the host
# sees it, through /proc/<pid>/root and /proc/<pid>/fd where a path is the process's own:
# the same reading works for a rank inside a container.
import json
import os
import re
import sys
import time

# One import a line (the alias keeps isort from merging them): the join drops lines.
from preflight.hostside.netlink import carrying as carrying  # joined
from preflight.hostside.netlink import interface_links as interface_links  # joined
from preflight.hostside.netlink import qdisc_stats as qdisc_stats  # joined
from preflight.hostside.netlink import route_interface  # joined
from preflight.hostside.procfs import CLK_TCK as CLK_TCK  # joined
from preflight.hostside.procfs import children as children  # joined
from preflight.hostside.procfs import cmdline as cmdline  # joined
from preflight.hostside.procfs import environ as environ  # joined
from preflight.hostside.procfs import meminfo as meminfo  # joined
from preflight.hostside.procfs import pressure_some_avg10 as pressure_some_avg10  # joined
from preflight.hostside.procfs import read as read  # joined
from preflight.hostside.procfs import section as section  # joined
from preflight.hostside.procfs import stat_fields  # joined
from preflight.hostside.sampler_gpu import gpu_reader as gpu_reader  # joined
from preflight.hostside.sampler_gpu import rank_gpus as rank_gpus  # joined
from preflight.hostside.sampler_rank import RANK_VARS as RANK_VARS  # joined
from preflight.hostside.sampler_rank import Rank as Rank  # joined
from preflight.hostside.sampler_rank import log_tail  # joined

SCHEMA = 1
LAUNCH_MODULE = "paddle.distributed.launch"
MARKER = "PREFLIGHT_LAUNCH"
# The processes that run a container's first process (podman's, docker's and containerd's,
# CRI-O's, LXC's), as /proc/<pid>/comm names them (cut to 15 characters).
CONTAINER_MONITORS = ("conmon", "containerd-shim", "docker-containe", "crun", "runc",
                      "lxc-start", "catatonit", "tini")
# What a launcher may run the training script through without exec'ing it (a .sh script,
# a timeout): the rank is the process they run.
WRAPPERS = ("sh", "bash", "dash", "zsh", "ksh", "timeout")
# A process is read as a launcher or not when first seen, and again only later: a process
# seen between its fork and its exec reads as its parent (a shell, podman exec), and an entry
# script may exec the launcher once its setup is done. A young one is read again every
# sample, an old one every RECHECK_S: the cost of a host's many other processes stays low.
YOUNG_S = 10.0
RECHECK_S = 20.0
# The routes to the job's peers and the host's interfaces are looked up again this often
# (a route or a bond's member may change), and for this many peers at most.
ROUTES_S = 60.0
ROUTES_MAX = 256


def host_part():
    out = {"cpus": os.cpu_count()}  # type: dict
    try:
        out["load"] = [float(x) for x in read("/proc/loadavg").split()[:3]]
    except (OSError, ValueError):
        pass
    for kind in ("cpu", "memory"):
        try:  # the share of the last 10 s some task stalled on it
            some = pressure_some_avg10("/proc/pressure/%s" % kind)
        except (OSError, ValueError):
            continue
        if some is not None:
            out["psi_" + kind] = some
    try:
        avail = meminfo().get("MemAvailable")
    except (OSError, ValueError):
        avail = None
    if avail is not None:
        out["mem_avail"] = avail
    nics = {}
    try:
        for line in read("/proc/net/dev").splitlines()[2:]:
            name, _, rest = line.partition(":")
            f = rest.split()
            if name.strip() != "lo" and len(f) >= 12:
                # rx bytes, rx drops, tx bytes, tx drops
                nics[name.strip()] = [int(f[0]), int(f[3]), int(f[8]), int(f[11])]
    except (OSError, ValueError):
        pass
    out["nics"] = nics
    # Each interface's root qdisc: a queue standing in it tells a sending side that holds
    # back what the host sends (a shaper, its NIC), which a link's other end cannot.
    qdiscs = section(qdisc_stats)
    out["qdiscs"] = dict((k, v) for k, v in qdiscs.items() if k != "lo") \
        if "error" not in qdiscs else qdiscs
    try:  # segments sent and sent again: a link that drops what this host sends
        rows = [line.split() for line in read("/proc/net/snmp").splitlines()
                if line.startswith("Tcp:")]
        tcp = dict(zip(rows[0][1:], rows[1][1:]))
        out["tcp"] = [int(tcp["OutSegs"]), int(tcp["RetransSegs"])]
    except (OSError, ValueError, IndexError, KeyError):
        pass
    return out


class Sampler(object):
    def __init__(self, token, pattern, netns):
        self.token, self.netns = token, netns
        self.pattern = re.compile(pattern) if pattern else None
        self.ignored = {}  # pid -> when to read it again: it was not a launcher (YOUNG_S)
        self.launchers = {}  # pid -> its part of a sample that does not change
        self.announced = set()  # launchers whose fixed part was sent
        self.ranks = {}  # pid -> Rank

    def find_launchers(self):
        pids = set()
        now = time.monotonic()
        uptime = None
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            pids.add(pid)
            if pid in self.launchers or pid == os.getpid() or self.ignored.get(pid, 0) > now:
                continue
            try:
                argv = cmdline(pid)
                found = is_launcher(argv) and (
                    not self.token or environ(pid).get(MARKER) == self.token) and (
                    self.ours(pid))
            except (OSError, ValueError):
                found = False
            if not found:
                if uptime is None:
                    try:
                        uptime = float(read("/proc/uptime").split()[0])
                    except (OSError, ValueError, IndexError):
                        uptime = 0.0  # every process reads as young: read again each sample
                try:
                    age = uptime - stat_fields(pid)[3] / float(CLK_TCK)
                except (OSError, ValueError):
                    age = 0.0  # gone, or about to be: its pid may come back as anything
                self.ignored[pid] = now if age < YOUNG_S else now + RECHECK_S
                continue
            self.ignored.pop(pid, None)
            self.launchers[pid] = {"pid": pid, "argv": argv[:64], "log_dir": log_dir(argv),
                                   "netns": section(os.readlink, "/proc/%d/ns/net" % pid)}
        for pid in [p for p in self.ignored if p not in pids]:  # pids are reused
            del self.ignored[pid]
        for pid in [p for p in self.launchers if p not in pids]:
            del self.launchers[pid]
            self.announced.discard(pid)

    def ours(self, pid):
        """Whether the launcher is this host's: in its network namespace, or in a container
        of its (a container monitor among its ancestors). Hosts that share one kernel (a
        simulated cluster) see each other's processes, in the other hosts' namespaces."""
        if self.netns is None or os.readlink("/proc/%d/ns/net" % pid) == self.netns:
            return True
        for _ in range(32):
            pid = stat_fields(pid)[4]
            if pid <= 1:
                return False
            if read("/proc/%d/comm" % pid).strip().startswith(CONTAINER_MONITORS):
                return True
        return False

    def find_ranks(self, lpid, depth=4):
        """The launcher's ranks: its descendants that carry Paddle's rank variables, each the
        first such process down its branch. A rank's own children (its DataLoader workers,
        a helper it runs) inherit the variables and are part of it, not ranks; a shell or
        timeout that runs the training script is passed through to what it runs."""
        out, todo = [], [(lpid, 0)]
        while todo:
            p, d = todo.pop()
            if d >= depth:
                continue
            for c in children(p):
                if c in self.ranks:
                    out.append(c)
                    continue
                try:
                    env = environ(c)
                    wrapper = read("/proc/%d/comm" % c).strip() in WRAPPERS
                except (OSError, ValueError):
                    continue
                if any(k in env for k in RANK_VARS[:4]) and not wrapper:
                    self.ranks[c] = Rank(c, env, lpid)
                    out.append(c)
                else:  # a helper of the launcher, or a wrapper: what it runs may be a rank
                    todo.append((c, d + 1))
        return out

    def tick(self):
        self.find_launchers()
        jobs, seen = [], set()
        netns_cache = {}  # type: dict  # one TCP table a namespace a sample
        for lpid, fixed in sorted(self.launchers.items()):
            # What does not change (argv, log dir) goes in the first sample a job is in.
            job = dict(fixed) if lpid not in self.announced else {"pid": lpid}
            self.announced.add(lpid)
            try:
                job["state"] = stat_fields(lpid)[0]
            except (OSError, ValueError):
                job["state"] = "gone"
            ranks = []
            for pid in self.find_ranks(lpid):
                rank = self.ranks[pid]
                seen.add(pid)
                part = section(rank.sample, self.pattern, netns_cache)
                part.setdefault("pid", pid)
                if not rank.announced:  # who it is, in the first sample it is in
                    part["who"], rank.announced = rank.who, True
                ranks.append(part)
            job["ranks"] = ranks
            jobs.append(job)
        gone = []
        for pid in [p for p in self.ranks if p not in seen]:
            rank = self.ranks.pop(pid)
            entry = {"pid": pid, "who": rank.who, "launcher": rank.launcher,
                     "tail": section(log_tail, rank.log_path, rank.launcher)}
            if isinstance(rank.oom_path, str) and rank.oom_kills is not None:
                before = rank.oom_kills  # as last seen while it ran; then now
                entry["oom_kills"] = [before, rank.ooms()]
            gone.append(entry)
        return {"jobs": jobs, "gone": gone}


def is_launcher(argv):
    """Whether argv is Python running Paddle's launcher (python -m paddle.distributed.launch,
    or fleetrun), not a command that only carries it in its arguments (timeout, podman run,
    srun, a shell)."""
    if not argv or not os.path.basename(argv[0]).startswith("python"):
        return False
    if len(argv) > 1 and os.path.basename(argv[1]) == "fleetrun":
        return True
    return any(a == "-m" and b == LAUNCH_MODULE for a, b in zip(argv, argv[1:]))


def log_dir(argv):
    """The launcher's --log_dir (Paddle's default: log, in its working directory)."""
    for i, a in enumerate(argv):
        if a == "--log_dir" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--log_dir="):
            return a.split("=", 1)[1]
    return "log"


class Carriers(object):
    """The interfaces the job's traffic leaves the host by: those the kernel routes its
    ranks' peers by (the peers with data queued to them), and the ones under those that
    carry it (netlink.carrying). A queue standing in another interface's qdisc (another
    container's, a guest's) is not the job's."""

    def __init__(self):
        self.routes = {}  # type: dict  # peer address -> interface index, or None
        self.links = {}  # type: dict
        self.at = None

    def of(self, jobs):
        now = time.monotonic()
        if self.at is None or now - self.at >= ROUTES_S:
            self.routes, self.links, self.at = {}, interface_links(), now
        peers = set()  # type: set
        for job in jobs:
            for r in job.get("ranks") or ():
                queued = r.get("sendq")
                if isinstance(queued, dict) and "error" not in queued:
                    peers.update(queued)
        indexes = set()
        for peer in sorted(peers)[:ROUTES_MAX]:
            if peer not in self.routes:
                self.routes[peer] = section(route_interface, peer)
            if isinstance(self.routes[peer], int):
                indexes.add(self.routes[peer])
        return carrying(indexes, self.links)


def main(argv):
    opts = json.loads(argv[0])
    interval = max(0.2, float(opts.get("interval", 5.0)))
    end = time.monotonic() + float(opts.get("lifetime", 3600.0))
    # Launchers in another network namespace are this host's containers' or, where hosts
    # share one kernel (a simulated cluster), other hosts' (Sampler.ours tells).
    netns = section(os.readlink, "/proc/self/ns/net")
    sampler = Sampler(opts.get("token") or "", opts.get("pattern"),
                      netns if isinstance(netns, str) else None)
    # GPUs only where the host has an NVIDIA driver ("always": tried anyway, for tests).
    gpus = section(gpu_reader, interval, opts.get("gpu") == "always")
    try:
        return loop(sampler, gpus, interval, end, netns)
    finally:
        if hasattr(gpus, "close"):
            gpus.close()


def gpu_part(gpus, sampler, jobs):
    """The sample's GPU part, and each rank's GPUs in its own part (jobs')."""
    if not hasattr(gpus, "sample"):
        return gpus  # {"error": why}: a driver, but neither NVML nor nvidia-smi answers
    rows = section(gpus.sample)
    if not isinstance(rows, list):
        return rows
    for job in jobs:
        for r in job.get("ranks") or ():
            rank = sampler.ranks.get(r.get("pid"))
            on = section(rank_gpus, rank.pid, rank.who, rows, gpus.uuids) if rank else None
            if isinstance(on, list):
                r["gpus"] = on
    return {"source": gpus.source, "gpus": rows}


def loop(sampler, gpus, interval, end, netns):
    out = sys.stdout
    carriers = Carriers()
    n = 0
    while True:
        began = time.monotonic()
        # "m": the monotonic clock beside the wall clock, which an NTP step or a date set by
        # hand moves: the watch keeps each host's samples on a steady time with it.
        sample = {"v": SCHEMA, "n": n, "t": round(time.time(), 3),
                  "m": round(time.monotonic(), 3), "host": section(host_part), "netns": netns}
        sample.update(section(sampler.tick))
        if isinstance(sample["host"], dict) and "qdiscs" in sample["host"]:
            # The interfaces of the host's qdiscs that carry its jobs' traffic now.
            sample["host"]["carriers"] = section(carriers.of, sample.get("jobs") or ())
        if gpus is not None:
            sample["gpu"] = gpu_part(gpus, sampler, sample.get("jobs") or ())
        cpu = os.times()
        sample["cost_s"] = round(cpu[0] + cpu[1], 4)  # the sampler's own CPU so far
        try:
            out.write(json.dumps(sample, separators=(",", ":")) + "\n")
            out.flush()
        except (OSError, ValueError):
            return 0  # the channel is gone: so is whoever read it
        n += 1
        now = time.monotonic()
        if now >= end:
            return 0
        time.sleep(max(0.0, min(end - now, interval - (now - began))))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
