# preflight watch, the sampler: one long-lived process a host, started over the transport's
# one channel, that prints one JSON line a sample about the Paddle jobs running there.
#
# Shipped like the probe (hostside/ship.py joins it after hostside/cgroup.py, gpu.py and
# sends the text in its command line), so: standard library only, Python 3.6 syntax, each
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

from preflight.hostside.cgroup import cgroup_v1_dir as cgroup_v1_dir  # joined
from preflight.hostside.cgroup import cgroup_v1_quota as cgroup_v1_quota  # joined
from preflight.hostside.cgroup import cgroup_v2_dir as cgroup_v2_dir  # joined
from preflight.hostside.cgroup import cgroup_v2_quota as cgroup_v2_quota  # joined
from preflight.hostside.cgroup import freezer_files as freezer_files  # joined
from preflight.hostside.cgroup import is_frozen as is_frozen  # joined
from preflight.hostside.cgroup import read as read  # joined
from preflight.hostside.cgroup import section  # joined
from preflight.hostside.sampler_gpu import gpu_source as gpu_source  # joined
from preflight.hostside.sampler_gpu import rank_gpus as rank_gpus  # joined

SCHEMA = 1
LAUNCH_MODULE = "paddle.distributed.launch"
MARKER = "PREFLIGHT_LAUNCH"
# The variables of a rank that say who it is (read once, when it is first seen).
RANK_VARS = ("PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM", "TRAINING_ROLE", "PADDLE_PSERVER_ID",
             "PADDLE_LOCAL_RANK", "PADDLE_RANK_IN_NODE", "POD_IP", "PADDLE_PORT",
             "PADDLE_CURRENT_ENDPOINT", "PADDLE_GLOBAL_SIZE", "PADDLE_ROLE_TYPE",
             "FLAGS_selected_gpus", "CUDA_VISIBLE_DEVICES")  # the GPUs the launcher gave it
HOOK_NAME = "preflight-watch.%d"  # what preflight.watch.step() writes, by the rank's own pid
HOOK_DIRS = ("/dev/shm", "/tmp")
# The processes that run a container's first process (podman's, docker's and containerd's,
# CRI-O's, LXC's), as /proc/<pid>/comm names them (cut to 15 characters).
CONTAINER_MONITORS = ("conmon", "containerd-shim", "docker-containe", "crun", "runc",
                      "lxc-start", "catatonit", "tini")
# What a launcher may run the training script through without exec'ing it (a .sh script,
# a timeout): the rank is the process they run.
WRAPPERS = ("sh", "bash", "dash", "zsh", "ksh", "timeout")
MAX_TASKS = 512  # threads of a rank whose scheduler times are summed
MAX_KIDS = 64  # a rank's descendants (DataLoader workers, helpers) whose times count to it
KIDS_DEPTH = 3
MAX_LOG_READ = 1 << 20  # new log bytes read a sample; past that the rest is skipped, said so
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# A process is read as a launcher or not when first seen, and again only later: a process
# seen between its fork and its exec reads as its parent (a shell, podman exec), and an entry
# script may exec the launcher once its setup is done. A young one is read again every
# sample, an old one every RECHECK_S: the cost of a host's many other processes stays low.
YOUNG_S = 10.0
RECHECK_S = 20.0


def stat_fields(pid):
    """(state, utime + stime in seconds, threads, start ticks, ppid) of /proc/<pid>/stat."""
    text = read("/proc/%s/stat" % pid)
    rest = text[text.rindex(")") + 2:].split()
    return (rest[0], (int(rest[11]) + int(rest[12])) / float(CLK_TCK), int(rest[17]),
            int(rest[19]), int(rest[1]))


def cmdline(pid):
    return read("/proc/%s/cmdline" % pid, 1 << 16).split("\0")[:-1]


def environ(pid):
    out = {}
    for item in read("/proc/%s/environ" % pid, 1 << 20).split("\0"):
        k, sep, v = item.partition("=")
        if sep:
            out[k] = v
    return out


def children(pid):
    """The pids of pid's children, from every thread's children list."""
    out = []  # type: list
    try:
        tasks = os.listdir("/proc/%s/task" % pid)
    except OSError:
        return out
    for tid in tasks:
        try:
            out.extend(int(c) for c in read("/proc/%s/task/%s/children" % (pid, tid)).split())
        except (OSError, ValueError):
            pass
    return out


class ThreadTimes(object):
    """A process's scheduler times summed over its threads, those that exited since included:
    a thread's times leave /proc with it (a gloo or loader thread that ends, a rank tearing
    down), and a sum over the threads left would fall, read as negative time."""

    def __init__(self):
        self.seen = {}  # type: dict  # tid -> (ns on a CPU, ns waiting for one) as last read
        self.done = (0, 0)  # ... of those gone since

    def read(self, pid):
        """(seconds on a CPU, seconds runnable but waiting for one, threads running, threads
        in uninterruptible sleep, whether the kernel keeps these times)."""
        now = {}
        running = blocked = read_ = 0
        tids = sorted(os.listdir("/proc/%s/task" % pid), key=int)[:MAX_TASKS]
        for tid in tids:
            try:
                fields = read("/proc/%s/task/%s/schedstat" % (pid, tid)).split()
                now[tid] = (int(fields[0]), int(fields[1]))
                read_ += 1
                state = read("/proc/%s/task/%s/stat" % (pid, tid))
                state = state[state.rindex(")") + 2]
            except (OSError, ValueError, IndexError):
                if tid in self.seen and tid not in now:  # still listed: kept as last read
                    now[tid] = self.seen[tid]
                continue
            running += state == "R"
            blocked += state == "D"
        run_done, wait_done = self.done
        for tid, (run, wait) in self.seen.items():
            was = now.get(tid)
            if was is None or was[0] < run or was[1] < wait:  # gone (its id maybe reused)
                run_done, wait_done = run_done + run, wait_done + wait
        self.seen, self.done = now, (run_done, wait_done)
        run = run_done + sum(v[0] for v in now.values())
        wait = wait_done + sum(v[1] for v in now.values())
        return run / 1e9, wait / 1e9, running, blocked, bool(read_) or has_schedstat(pid)


def io_bytes(pid):
    """[bytes read, bytes written] through the storage layer so far (/proc/PID/io: not its
    sockets' or pipes'): a rank in D state whose figures grow reads or writes files (a
    checkpoint, a data loader); one whose figures stand still waits on storage that does
    not answer."""
    fields = dict(line.split(": ", 1) for line in read("/proc/%s/io" % pid).splitlines()
                  if ": " in line)
    return [int(fields["read_bytes"]), int(fields["write_bytes"])]


def has_schedstat(pid):
    """Whether the kernel gives a process its schedstat: not without CONFIG_SCHED_INFO, nor
    in some sandboxes (gVisor). Asked where no thread's could be read (they may only have
    exited between the listing and the read)."""
    try:
        read("/proc/%s/schedstat" % pid, 64)
    except OSError:
        return not os.path.isdir("/proc/%s" % pid)  # gone: nothing is said of the kernel
    return True


def ns_pid(pid):
    """The pid the process has in its own pid namespace (a container's), else pid."""
    for line in read("/proc/%s/status" % pid).splitlines():
        if line.startswith("NSpid:"):
            return int(line.split()[-1])
    return pid


def hook_steps(pid, inner_pid, own_dir):
    """(steps, the rank's wall time of its last step) the step hook wrote; None without."""
    for d in ((own_dir,) if own_dir else HOOK_DIRS):
        try:
            text = read("/proc/%s/root%s/%s" % (pid, d, HOOK_NAME % inner_pid), 256)
        except OSError:
            continue
        fields = text.split()
        if len(fields) >= 2:
            return int(fields[0]), float(fields[1])
    return None


def quota_of(pid):
    """The smallest CPU quota over the process's cgroups, with the throttling of the cgroup
    that sets it (cpu.stat: periods, throttled periods, seconds throttled)."""
    quotas = [q for q in (section(cgroup_v1_quota, pid), section(cgroup_v2_quota, pid))
              if isinstance(q, dict) and "cores" in q]
    if not quotas:
        return None
    q = min(quotas, key=lambda x: x["cores"])
    out = {"cores": round(q["cores"], 4), "path": q["path"]}
    try:
        stat = dict(line.split() for line in read(q["path"] + "/cpu.stat").splitlines()
                    if len(line.split()) == 2)
        out["periods"] = int(stat.get("nr_periods", 0))
        out["throttled"] = int(stat.get("nr_throttled", 0))
        if "throttled_time" in stat:  # v1: nanoseconds
            out["throttled_s"] = int(stat["throttled_time"]) / 1e9
        elif "throttled_usec" in stat:  # v2
            out["throttled_s"] = int(stat["throttled_usec"]) / 1e6
    except (OSError, ValueError):
        pass
    return out


def oom_kills_path(pid):
    """The file that counts the kernel's OOM kills in pid's memory cgroup: v2 memory.events
    (its oom_kill takes in the cgroups below), v1 memory.oom_control (kernel 4.13 on); None
    where there is neither."""
    for found, name in ((section(cgroup_v2_dir, pid), "memory.events"),
                        (section(cgroup_v1_dir, "memory", pid), "memory.oom_control")):
        if isinstance(found, tuple) and os.path.exists(os.path.join(found[0], name)):
            return os.path.join(found[0], name)
    return None


def oom_kills(path):
    """The oom_kill count of a memory.events or memory.oom_control file; None without."""
    for line in read(path).splitlines():
        f = line.split()
        if len(f) == 2 and f[0] == "oom_kill":
            return int(f[1])
    return None


def tcp_queues(pid, netns_cache):
    """{peer address: bytes waiting in the rank's TCP send queues to it} for its established
    connections with data queued (/proc/<pid>/net/tcp is its network namespace's table)."""
    inodes = set()
    fd_dir = "/proc/%s/fd" % pid
    for fd in os.listdir(fd_dir)[:4096]:
        try:
            target = os.readlink(fd_dir + "/" + fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    if not inodes:
        return {}
    ns = os.readlink("/proc/%s/ns/net" % pid)
    table = netns_cache.get(ns)
    if table is None:
        table = netns_cache[ns] = tcp_table(pid)
    out = {}  # type: dict
    for inode, peer, queued in table:
        if inode in inodes:
            out[peer] = out.get(peer, 0) + queued
    return out


def tcp_table(pid):
    """(inode, peer IPv4 address, send queue bytes) of the established IPv4 connections with
    data queued, in pid's network namespace."""
    rows = []
    for line in read("/proc/%s/net/tcp" % pid, 1 << 22).splitlines()[1:]:
        f = line.split()
        if len(f) < 10 or f[3] != "01":  # 01: ESTABLISHED
            continue
        queued = int(f[4].split(":")[0], 16)
        if queued:
            ip = int(f[2].split(":")[0], 16)  # little-endian hex
            peer = "%d.%d.%d.%d" % (ip & 255, ip >> 8 & 255, ip >> 16 & 255, ip >> 24)
            rows.append((f[9], peer, queued))
    return rows


def host_part():
    out = {"cpus": os.cpu_count()}  # type: dict
    try:
        out["load"] = [float(x) for x in read("/proc/loadavg").split()[:3]]
    except (OSError, ValueError):
        pass
    for kind in ("cpu", "memory"):
        try:  # "some avg10=...": the share of the last 10 s some task stalled on it
            line = read("/proc/pressure/%s" % kind).splitlines()[0]
            out["psi_" + kind] = float(line.split()[1].split("=")[1])
        except (OSError, ValueError, IndexError):
            pass
    try:
        for line in read("/proc/meminfo").splitlines():
            if line.startswith("MemAvailable:"):
                out["mem_avail"] = int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
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
    try:  # segments sent and sent again: a link that drops what this host sends
        rows = [line.split() for line in read("/proc/net/snmp").splitlines()
                if line.startswith("Tcp:")]
        tcp = dict(zip(rows[0][1:], rows[1][1:]))
        out["tcp"] = [int(tcp["OutSegs"]), int(tcp["RetransSegs"])]
    except (OSError, ValueError, IndexError, KeyError):
        pass
    return out


class Rank(object):
    """What is kept of one rank between samples: who it is, where its log is read."""

    def __init__(self, pid, env, launcher):
        self.pid, self.launcher = pid, launcher
        self.who = {k: env[k] for k in RANK_VARS if k in env}
        self.inner = section(ns_pid, pid)
        self.hook_dir = env.get("PREFLIGHT_WATCH_DIR")
        self.log_offset = 0
        self.log_path = None
        self.steps = 0
        self.last_line = None
        self.announced = False
        # Where its memory cgroup counts OOM kills, and the count when last read: a rank
        # that ends without a word while that count rises was killed by the OOM killer.
        self.oom_path = section(oom_kills_path, pid)
        self.oom_kills = None
        # Its descendants' scheduler times as last read, by (pid, start ticks), and the
        # times of those gone since: its workers' CPU counts to it, and stays counted once
        # they exit, so that its totals only grow.
        self.kids = {}  # type: dict  # (pid, start) -> (its ThreadTimes, run, wait)
        self.times = ThreadTimes()  # its own threads'
        self.cgroups_named, self.freezer = None, []  # see frozen()
        self.kids_done = (0.0, 0.0)

    def sample(self, pattern, netns_cache):
        state, cpu_s, threads, _, _ = stat_fields(self.pid)
        out = {"pid": self.pid, "state": state, "cpu_s": round(cpu_s, 3), "threads": threads}
        if isinstance(self.oom_path, str):
            out["oom_kills"] = self.ooms()
        if state == "Z":  # exited, not yet reaped: what it said last tells how it ended
            out["tail"] = section(log_tail, self.log_path, self.launcher)
            return out
        run_s, wait_s, running, blocked, timed = self.times.read(self.pid)
        kids = self.kids_times()
        if kids is not None:  # a DataLoader's workers waiting for a CPU hold the rank back
            run_s, wait_s = run_s + kids[0], wait_s + kids[1]
            out["kids"] = len(self.kids)
        out.update(run_s=round(run_s, 4), wait_s=round(wait_s, 4), running=running,
                   blocked=blocked)
        if not timed:  # no time on or waiting for a CPU to read: said, never taken for 0
            out["sched"] = False
        try:
            out["wchan"] = read("/proc/%s/wchan" % self.pid, 128).strip() or None
        except OSError:
            pass
        out["log"] = section(self.log_part, pattern)
        if isinstance(self.inner, int):
            out["hook"] = section(hook_steps, self.pid, self.inner, self.hook_dir)
        out["cgroup"] = section(quota_of, self.pid)
        out["io"] = section(io_bytes, self.pid)
        if section(self.frozen) is True:
            out["frozen"] = True
        out["sendq"] = section(tcp_queues, self.pid, netns_cache)
        return out

    def frozen(self):
        """Whether its cgroup is frozen; where that is read is found again only when
        /proc/PID/cgroup names other cgroups (the mount table is not read every sample)."""
        named = read("/proc/%s/cgroup" % self.pid)
        if named != self.cgroups_named:
            self.cgroups_named, self.freezer = named, freezer_files(self.pid)
        return is_frozen(self.freezer)

    def kids_times(self):
        """(seconds on a CPU, seconds waiting for one) of its descendants so far, those gone
        included; None where it has had none."""
        now = {}  # type: dict
        todo = [(self.pid, 0)]
        while todo and len(now) < MAX_KIDS:
            p, d = todo.pop()
            if d >= KIDS_DEPTH:
                continue
            for c in children(p)[:MAX_KIDS]:
                try:
                    key = (c, stat_fields(c)[3])
                    times = self.kids[key][0] if key in self.kids else ThreadTimes()
                    run, wait = times.read(c)[:2]
                except (OSError, ValueError, IndexError):
                    continue  # gone between the two reads
                now[key] = (times, run, wait)
                todo.append((c, d + 1))
        run_done, wait_done = self.kids_done
        for key, (_, run, wait) in self.kids.items():
            if key not in now:  # exited: what it had counts still
                run_done, wait_done = run_done + run, wait_done + wait
        self.kids, self.kids_done = now, (run_done, wait_done)
        if not now and not run_done and not wait_done:
            return None
        return (run_done + sum(v[1] for v in now.values()),
                wait_done + sum(v[2] for v in now.values()))

    def ooms(self):
        """Its memory cgroup's OOM kills now (an {"error"} where they cannot be read)."""
        n = section(oom_kills, self.oom_path)
        if isinstance(n, int):
            self.oom_kills = n
        return n

    def log_part(self, pattern):
        """The rank's log (its stdout's file): size, step lines counted so far, the last
        line when it changed."""
        fd = "/proc/%s/fd/1" % self.pid
        path = os.readlink(fd)
        st = os.stat(fd)
        if not path.startswith("/") or not (st.st_mode & 0o170000) == 0o100000:
            return {"path": path}  # a pipe or a terminal: no log to read
        out = {"path": path, "size": st.st_size}
        if path != self.log_path:
            self.log_path, self.log_offset = path, 0
        if st.st_size < self.log_offset:  # truncated: read again from its start
            self.log_offset = 0
        if st.st_size - self.log_offset > MAX_LOG_READ:
            out["skipped"] = st.st_size - MAX_LOG_READ - self.log_offset
            self.log_offset = st.st_size - MAX_LOG_READ
        with open(fd, "rb") as f:
            f.seek(self.log_offset)
            data = f.read(st.st_size - self.log_offset)
        end = data.rfind(b"\n") + 1  # whole lines only; a partial one waits
        self.log_offset += end
        lines = data[:end].decode("utf-8", "replace").splitlines()
        if pattern is not None:
            self.steps += sum(1 for ln in lines if pattern.search(ln))
            out["steps"] = self.steps
        text = [ln.strip() for ln in lines if ln.strip()]
        if text and text[-1][:200] != self.last_line:
            self.last_line = out["last"] = text[-1][:200]
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


def log_tail(path, launcher):
    """The last lines of a rank's log once it has exited: what it said last (a traceback, or
    its last step), read where the host sees it or inside its launcher's container."""
    if not path:
        return None
    for where in (path, "/proc/%d/root%s" % (launcher, path)):
        try:
            with open(where, "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - 2048))
                lines = f.read().decode("utf-8", "replace").splitlines()
            return [ln[:200] for ln in lines if ln.strip()][-6:]
        except OSError:
            continue
    return None


def log_dir(argv):
    """The launcher's --log_dir (Paddle's default: log, in its working directory)."""
    for i, a in enumerate(argv):
        if a == "--log_dir" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--log_dir="):
            return a.split("=", 1)[1]
    return "log"


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
    gpus = section(gpu_source, interval, opts.get("gpu") == "always")
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
    n = 0
    while True:
        began = time.monotonic()
        # "m": the monotonic clock beside the wall clock, which an NTP step or a date set by
        # hand moves: the watch keeps each host's samples on a steady time with it.
        sample = {"v": SCHEMA, "n": n, "t": round(time.time(), 3),
                  "m": round(time.monotonic(), 3), "host": section(host_part), "netns": netns}
        sample.update(section(sampler.tick))
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
