# The probe's CPU and memory part: what the host's CPUs are, how busy they are, what other
# work takes of them, and the memory, shared memory, temporary space and limits a job gets.
# Joined into the probe (hostside/ship.py): standard library only, Python 3.6 syntax.
import os
import resource
import time

# One import a line (the alias keeps isort from merging them): the join drops lines.
from preflight.hostside.cgroup import cgroup_v1_dir as cgroup_v1_dir  # joined
from preflight.hostside.cgroup import cgroup_v1_quota as cgroup_v1_quota  # joined
from preflight.hostside.cgroup import cgroup_v2_dir as cgroup_v2_dir  # joined
from preflight.hostside.cgroup import cgroup_v2_quota as cgroup_v2_quota  # joined
from preflight.hostside.cgroup import up_from as up_from  # joined
from preflight.hostside.procfs import busy_cpu_s as busy_cpu_s  # joined
from preflight.hostside.procfs import cpu_s_with_children as cpu_s_with_children  # joined
from preflight.hostside.procfs import cpu_times as cpu_times  # joined
from preflight.hostside.procfs import meminfo as meminfo  # joined
from preflight.hostside.procfs import pressure_some_avg10 as pressure_some_avg10  # joined
from preflight.hostside.procfs import read as read  # joined
from preflight.hostside.procfs import section  # joined


# ---------------------------------------------------------------- cpu
def memory_limit(pid="self"):
    """The smallest memory limit from pid's cgroup up to the root (v2 memory.max, v1
    memory.limit_in_bytes), in bytes; None where nothing limits it."""
    best = None
    for found, name in ((section(cgroup_v2_dir, pid), "memory.max"),
                        (section(cgroup_v1_dir, "memory", pid), "memory.limit_in_bytes")):
        if not isinstance(found, tuple):
            continue
        for path in up_from(found):
            try:
                text = read(os.path.join(path, name)).strip()
            except OSError:
                continue
            # v1 writes "no limit" as a page-rounded 2**63-1
            if text.isdigit() and int(text) < (1 << 62) and (best is None or int(text) < best):
                best = int(text)
    return best


def process_cgroup(pid):
    """What the cgroup and affinity of process pid (the job's container's) let it use: CPUs
    of its affinity (its cpuset), the smallest CPU quota above it and the smallest memory
    limit; as the host's CPU facts read them for the probe itself."""
    try:
        cpus = sorted(os.sched_getaffinity(pid))
    except (AttributeError, OSError):
        cpus = []
    quotas = [q for q in (section(cgroup_v1_quota, pid), section(cgroup_v2_quota, pid))
              if isinstance(q, dict) and "cores" in q]
    quota = min(quotas, key=lambda q: q["cores"]) if quotas else None
    if quota is not None:
        quota.pop("rel", None)
    return {"affinity": len(cpus), "cpuset": cpu_list(cpus), "quota": quota,
            "memory_limit_bytes": memory_limit(pid)}


def cpu_list(cpus):
    """[0, 1, 2, 5] -> "0-2,5", as cpuset.cpus writes it."""
    out = []  # type: list
    for c in cpus:
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return ",".join("%d" % a if a == b else "%d-%d" % (a, b) for a, b in out)


def cpu_quota():
    quotas = [q for q in (section(cgroup_v1_quota), section(cgroup_v2_quota))
              if q and "cores" in q]
    return min(quotas, key=lambda q: q["cores"]) if quotas else None


def cgroup_v1_usage_path(rel):
    """The cpuacct.usage file of the cgroup at rel (the quota's) in the cpuacct hierarchy,
    which may be mounted apart from cpu; else of this process's own cpuacct cgroup."""
    own = None
    for line in read("/proc/self/cgroup").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and "cpuacct" in parts[1].split(","):
            own = parts[2]
    for line in read("/proc/self/mountinfo", 1 << 20).splitlines():
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(rfields) >= 3 and rfields[0] == "cgroup" and \
                "cpuacct" in rfields[2].split(","):
            root, point = fields[3], fields[4]
            for r in (rel, own):
                if r is None:
                    continue
                if root != "/" and r.startswith(root):
                    r = r[len(root):]
                path = os.path.normpath(point + "/" + r.lstrip("/") + "/cpuacct.usage")
                if os.path.exists(path):
                    return path
    return None


def scope_usage(quota):
    """Returns (scope, reader): where the job's CPU is shared and a function giving the CPU
    seconds used there so far. The cgroup that holds the quota when there is one (what the
    whole machine does is not this job's business); else the CPUs of this process's
    affinity, machine-wide."""
    if quota is not None and quota["version"] == 2:
        stat = os.path.join(quota["path"], "cpu.stat")

        def v2():
            for line in read(stat).splitlines():
                if line.startswith("usage_usec "):
                    return int(line.split()[1]) / 1e6
            raise ValueError("no usage_usec in " + stat)
        v2()
        return "cgroup v2 " + quota["path"], v2
    if quota is not None:
        path = cgroup_v1_usage_path(quota.get("rel"))
        if path is not None:
            def v1():
                return int(read(path)) / 1e9
            v1()
            return "cgroup v1 " + os.path.dirname(path), v1
    try:
        mine = set("cpu%d" % c for c in os.sched_getaffinity(0))
    except (AttributeError, OSError):
        mine = None

    def host():
        return busy_cpu_s(mine)
    return "host", host


def own_cpu_s(child_pids):
    """CPU seconds used by this probe and its children, including a child not yet waited
    for (the Paddle import runs during the sample): not other work."""
    t = os.times()
    total = t[0] + t[1] + t[2] + t[3]
    for pid in child_pids:
        try:
            total += cpu_s_with_children(pid)
        except (OSError, ValueError, IndexError):
            pass
    return total


def cpu_sample_start(child_pids):
    """What the CPU sample needs at its start, read when the probe starts so that the
    sample spans the probe's other work instead of adding to it."""
    quota = section(cpu_quota)
    quota = quota if isinstance(quota, dict) and "cores" in quota else None
    scope = None
    try:
        name, reader = scope_usage(quota)
        scope = (name, reader, reader())
    except (OSError, ValueError):
        pass
    return {"t": time.monotonic(), "times": section(cpu_times), "quota": quota,
            "scope": scope, "own": own_cpu_s(child_pids)}


def pressure(quota):
    """PSI 'some avg10' for CPU: the share of the last 10 s in which a runnable task waited
    for a CPU, in the quota's cgroup (v2) or machine-wide; None where the kernel has none."""
    paths = ([os.path.join(quota["path"], "cpu.pressure")]
             if quota is not None and quota["version"] == 2 else []) + ["/proc/pressure/cpu"]
    for path in paths:
        try:
            some = pressure_some_avg10(path)
        except (OSError, ValueError):
            continue
        if some is not None:
            return {"some_avg10": some, "source": path}
    return None


def smt_facts():
    """Hardware threads per core (from cpu0's siblings) and whether SMT is on."""
    out = {}
    try:
        text = read("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list").strip()
        n = 0
        for part in text.split(","):
            a, _, b = part.partition("-")
            n += (int(b) - int(a) + 1) if b else 1
        out["threads_per_core"] = n
    except (OSError, ValueError):
        pass
    try:
        out["smt_active"] = read("/sys/devices/system/cpu/smt/active").strip() == "1"
    except OSError:
        pass
    return out


def cpu_facts(sample_s, first, child_pids):
    """first: cpu_sample_start()'s, read when the probe started."""
    logical = os.cpu_count() or 1
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = logical
    quota = first["quota"]
    effective = float(min(affinity, quota["cores"])) if quota else float(affinity)
    started, before = first["t"], first["times"]
    t0, i0 = before if isinstance(before, tuple) else cpu_times()
    time.sleep(max(0.0, sample_s - (time.monotonic() - started)))
    t1, i1 = cpu_times()
    busy = 0.0 if t1 == t0 else 1.0 - (i1 - i0) / float(t1 - t0)
    taken = None
    if first["scope"] is not None:
        scope, reader, used0 = first["scope"]
        try:
            used = reader() - used0 - (own_cpu_s(child_pids) - first["own"])
            wall = time.monotonic() - started
            taken = {"scope": scope, "busy_cores": round(max(0.0, used / wall), 3),
                     "window_s": round(wall, 3)}
        except (OSError, ValueError):
            pass
    load = os.getloadavg()
    model = None
    try:
        for line in read("/proc/cpuinfo", 1 << 20).splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "logical": logical,
        "affinity": affinity,
        "quota": quota,
        "effective": round(effective, 3),
        "utilization": round(max(0.0, min(1.0, busy)), 3),
        "sample_s": sample_s,
        "loadavg": [round(x, 2) for x in load],
        "model": model,
        "other_work": taken,
        "pressure": pressure(quota),
        "smt": smt_facts(),
    }


# ---------------------------------------------------------------- memory, shm, limits
def memory_facts():
    info = meminfo()
    return {"total_bytes": info.get("MemTotal"), "available_bytes": info.get("MemAvailable"),
            "swap_total_bytes": info.get("SwapTotal"),
            "cgroup_limit_bytes": section(memory_limit)}


def shm_facts():
    st = os.statvfs("/dev/shm")
    return {"size_bytes": st.f_blocks * st.f_frsize, "free_bytes": st.f_bavail * st.f_frsize}


def tmp_facts():
    path = os.environ.get("TMPDIR") or "/tmp"
    st = os.statvfs(path)
    return {"path": path, "size_bytes": st.f_blocks * st.f_frsize,
            "free_bytes": st.f_bavail * st.f_frsize}


def limits_facts():
    def pair(which):
        soft, hard = resource.getrlimit(which)
        return {"soft": None if soft == resource.RLIM_INFINITY else soft,
                "hard": None if hard == resource.RLIM_INFINITY else hard}
    return {"nofile": pair(resource.RLIMIT_NOFILE), "memlock": pair(resource.RLIMIT_MEMLOCK)}

