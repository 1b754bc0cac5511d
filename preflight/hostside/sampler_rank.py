# preflight watch, the sampler's rank part: what is read of one rank each sample (its state,
# its threads' and its workers' scheduler times, its log's new lines, the step hook's count,
# its cgroup's quota and throttling, OOM kills, storage bytes, a frozen cgroup, its TCP send
# queues), and what is kept of it between samples.
# Joined into the sampler (hostside/ship.py): standard library only, Python 3.6 syntax.
import os
import stat

# One import a line (the alias keeps isort from merging them): the join drops lines.
from preflight.hostside.cgroup import cgroup_v1_dir as cgroup_v1_dir  # joined
from preflight.hostside.cgroup import cgroup_v1_quota as cgroup_v1_quota  # joined
from preflight.hostside.cgroup import cgroup_v2_dir as cgroup_v2_dir  # joined
from preflight.hostside.cgroup import cgroup_v2_quota as cgroup_v2_quota  # joined
from preflight.hostside.cgroup import freezer_files as freezer_files  # joined
from preflight.hostside.cgroup import is_frozen  # joined
from preflight.hostside.procfs import children as children  # joined
from preflight.hostside.procfs import has_schedstat as has_schedstat  # joined
from preflight.hostside.procfs import io_bytes as io_bytes  # joined
from preflight.hostside.procfs import ipv4_of as ipv4_of  # joined
from preflight.hostside.procfs import ns_pid as ns_pid  # joined
from preflight.hostside.procfs import read as read  # joined
from preflight.hostside.procfs import section as section  # joined
from preflight.hostside.procfs import stat_fields as stat_fields  # joined
from preflight.hostside.procfs import stat_rest as stat_rest  # joined
from preflight.hostside.procfs import task_schedstat as task_schedstat  # joined
from preflight.hostside.procfs import tasks as tasks  # joined
from preflight.hostside.procfs import tcp_rows  # joined
from preflight.hostside.stephook import HOOK_NAME as HOOK_NAME  # joined
from preflight.hostside.stephook import hook_dirs as hook_dirs  # joined
from preflight.hostside.stephook import hook_parse  # joined

# The variables of a rank that say who it is (read once, when it is first seen).
RANK_VARS = ("PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM", "TRAINING_ROLE", "PADDLE_PSERVER_ID",
             "PADDLE_LOCAL_RANK", "PADDLE_RANK_IN_NODE", "POD_IP", "PADDLE_PORT",
             "PADDLE_CURRENT_ENDPOINT", "PADDLE_GLOBAL_SIZE", "PADDLE_ROLE_TYPE",
             "FLAGS_selected_gpus", "CUDA_VISIBLE_DEVICES")  # the GPUs the launcher gave it
MAX_TASKS = 512  # threads of a rank whose scheduler times are summed
MAX_KIDS = 64  # a rank's descendants (DataLoader workers, helpers) whose times count to it
KIDS_DEPTH = 3
MAX_LOG_READ = 1 << 20  # new log bytes read a sample; past that the rest is skipped, said so


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
        for tid in tasks(pid, MAX_TASKS):
            try:
                now[tid] = task_schedstat(pid, tid)
                read_ += 1
                state = stat_rest(pid, tid)[0]
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


def hook_steps(pid, inner_pid, dirs):
    """(steps, the rank's wall time of its last step) the step hook wrote; None without.
    Only a regular file of the rank's own user is its count: /dev/shm is everyone's, and a
    file another user left under its name (a link, a pipe that would hold the sampler,
    made-up counts) is not read."""
    try:
        owner = os.stat("/proc/%s" % pid).st_uid
    except OSError:  # it has just exited
        return None
    for d in dirs:
        path = "/proc/%s/root%s/%s" % (pid, d, HOOK_NAME % inner_pid)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != owner:
                continue
            text = os.read(fd, 256).decode("utf-8", "replace")
        except OSError:
            continue
        finally:
            os.close(fd)
        found = hook_parse(text)
        if found is not None:
            return found
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
    for f in tcp_rows("/proc/%s/net/tcp" % pid):
        if len(f) < 10 or f[3] != "01":  # 01: ESTABLISHED
            continue
        queued = int(f[4].split(":")[0], 16)
        if queued:
            rows.append((f[9], ipv4_of(f[2]), queued))
    return rows


class Rank(object):
    """What is kept of one rank between samples: who it is, where its log is read."""

    def __init__(self, pid, env, launcher):
        self.pid, self.launcher = pid, launcher
        self.who = {k: env[k] for k in RANK_VARS if k in env}
        self.inner = section(ns_pid, pid)
        self.hook_dirs = hook_dirs(env)
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
            out["hook"] = section(hook_steps, self.pid, self.inner, self.hook_dirs)
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
