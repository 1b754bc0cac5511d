# preflight's one reader of /proc (and the guard of every section read), shared by the
# shipped probe and the watch's sampler: standard library only, Python 3.6 syntax, joined
# into each text (hostside/ship.py). What a file of /proc holds, and how its fields split, is
# written here once; what the probe and the sampler make of it is theirs.
import os

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def read(path, limit=65536):
    with open(path, "rb") as f:
        return f.read(limit).decode("utf-8", "replace")


def section(fn, *args):
    try:
        return fn(*args)
    except Exception as e:  # one broken area must not hide the others
        return {"error": "%s: %s" % (type(e).__name__, str(e)[:500])}


# ---------------------------------------------------------------- processes
def pids():
    """The pids of every process this mount namespace's /proc lists."""
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def stat_rest(pid, task=None):
    """The fields of /proc/<pid>/stat (or a thread's) after the command name, which may hold
    spaces and parentheses: [state, ppid, pgrp, ...] (proc(5)'s fields 3 on)."""
    text = read("/proc/%s/task/%s/stat" % (pid, task) if task is not None
                else "/proc/%s/stat" % pid)
    return text[text.rindex(")") + 2:].split()


def stat_fields(pid):
    """(state, utime + stime in seconds, threads, start ticks, ppid) of /proc/<pid>/stat."""
    rest = stat_rest(pid)
    return (rest[0], (int(rest[11]) + int(rest[12])) / float(CLK_TCK), int(rest[17]),
            int(rest[19]), int(rest[1]))


def cpu_s_with_children(pid):
    """utime + stime + cutime + cstime of pid, in seconds (its children waited for too)."""
    rest = stat_rest(pid)
    return sum(int(x) for x in rest[11:15]) / float(CLK_TCK)


def parents():
    """{pid: its parent's pid} of every process that can be read."""
    out = {}
    for pid in pids():
        try:
            out[pid] = int(stat_rest(pid)[1])
        except (OSError, ValueError, IndexError):
            continue
    return out


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


def tasks(pid, limit):
    """The thread ids of pid, oldest first, at most limit."""
    return sorted(os.listdir("/proc/%s/task" % pid), key=int)[:limit]


def task_schedstat(pid, tid):
    """(ns on a CPU, ns runnable but waiting for one) of one thread (CONFIG_SCHED_INFO)."""
    fields = read("/proc/%s/task/%s/schedstat" % (pid, tid)).split()
    return int(fields[0]), int(fields[1])


def has_schedstat(pid):
    """Whether the kernel gives a process its schedstat: not without CONFIG_SCHED_INFO, nor
    in some sandboxes (gVisor). Asked where no thread's could be read (they may only have
    exited between the listing and the read)."""
    try:
        read("/proc/%s/schedstat" % pid, 64)
    except OSError:
        return not os.path.isdir("/proc/%s" % pid)  # gone: nothing is said of the kernel
    return True


def io_bytes(pid):
    """[bytes read, bytes written] through the storage layer so far (/proc/PID/io: not its
    sockets' or pipes'): a rank in D state whose figures grow reads or writes files (a
    checkpoint, a data loader); one whose figures stand still waits on storage that does
    not answer."""
    fields = dict(line.split(": ", 1) for line in read("/proc/%s/io" % pid).splitlines()
                  if ": " in line)
    return [int(fields["read_bytes"]), int(fields["write_bytes"])]


def ns_pid(pid):
    """The pid the process has in its own pid namespace (a container's), else pid."""
    for line in read("/proc/%s/status" % pid).splitlines():
        if line.startswith("NSpid:"):
            return int(line.split()[-1])
    return pid


# ---------------------------------------------------------------- the host
def cpu_times():
    """(total ticks, idle ticks: idle + iowait) of the machine, /proc/stat's cpu line."""
    for line in read("/proc/stat").splitlines():
        if line.startswith("cpu "):
            vals = [int(x) for x in line.split()[1:]]
            idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
            return sum(vals[:8]), idle
    raise ValueError("no cpu line in /proc/stat")


def busy_cpu_s(mine=None):
    """Seconds the CPUs named in mine ({"cpu0", ...}; None: all) were busy since boot."""
    busy = 0
    for line in read("/proc/stat").splitlines():
        name = line.split(" ", 1)[0]
        if name.startswith("cpu") and name != "cpu" and (mine is None or name in mine):
            vals = [int(x) for x in line.split()[1:9]]
            busy += sum(vals) - vals[3] - (vals[4] if len(vals) > 4 else 0)
    return busy / float(CLK_TCK)


def meminfo():
    """/proc/meminfo in bytes: {"MemTotal": ..., "MemAvailable": ...}."""
    info = {}
    for line in read("/proc/meminfo").splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            info[key] = int(parts[0]) * 1024
    return info


def pressure_some_avg10(path):
    """A PSI file's 'some avg10': the share of the last 10 s some task stalled on what it
    measures (a CPU, memory); None where the line has none."""
    for line in read(path).splitlines():
        if line.startswith("some "):
            for kv in line.split()[1:]:
                k, _, v = kv.partition("=")
                if k == "avg10":
                    return float(v)
    return None


def tcp_rows(path, limit=1 << 22):
    """The rows of a /proc/net/tcp file (its header left out), each split into fields:
    [sl, local, remote, state (hex), tx_queue:rx_queue, ..., inode (9)]."""
    return [line.split() for line in read(path, limit).splitlines()[1:]]


def ipv4_of(hex_address):
    """'0100007F:1F90' (a /proc/net/tcp address, little-endian hex) -> '127.0.0.1'."""
    ip = int(hex_address.split(":")[0], 16)
    return "%d.%d.%d.%d" % (ip & 255, ip >> 8 & 255, ip >> 16 & 255, ip >> 24)
