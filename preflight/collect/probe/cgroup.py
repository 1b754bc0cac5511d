# preflight's readers of /proc and of cgroups, shared by the shipped probe and the watch's
# sampler: standard library only, Python 3.6 syntax, joined into each text (collect/
# probe_text.py) like nvml.py.
import os


def read(path, limit=65536):
    with open(path, "rb") as f:
        return f.read(limit).decode("utf-8", "replace")


def section(fn, *args):
    try:
        return fn(*args)
    except Exception as e:  # one broken area must not hide the others
        return {"error": "%s: %s" % (type(e).__name__, str(e)[:500])}


def cgroup_v1_dir(controller, pid="self"):
    """(the directory of pid's cgroup in the v1 hierarchy holding controller, that
    hierarchy's mount point), as this process's mount namespace sees them; None without."""
    rel = None
    for line in read("/proc/%s/cgroup" % pid).splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and controller in parts[1].split(","):
            rel = parts[2]
    if rel is None:
        return None
    mount_root = mount_point = None
    for line in read("/proc/self/mountinfo", 1 << 20).splitlines():
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(rfields) >= 3 and rfields[0] == "cgroup" and \
                controller in rfields[2].split(","):
            mount_root, mount_point = fields[3], fields[4]
    if mount_root is None or mount_point is None:
        return None
    if mount_root != "/" and rel.startswith(mount_root):
        rel = rel[len(mount_root):]
    return os.path.normpath(mount_point + "/" + rel.lstrip("/")), mount_point


def cgroup_v2_dir(pid="self"):
    """(the directory of pid's cgroup v2, the cgroup2 mount point); None without one."""
    rel = None
    for line in read("/proc/%s/cgroup" % pid).splitlines():
        if line.startswith("0::"):
            rel = line[3:]
    if rel is None:
        return None
    root = None
    for line in read("/proc/self/mountinfo", 1 << 20).splitlines():
        left, _, right = line.partition(" - ")
        if right.split()[:1] == ["cgroup2"]:
            root = left.split()[4]
    if root is None:
        return None
    return os.path.normpath(root + "/" + rel.lstrip("/")), root


def up_from(found):
    """The directories from a cgroup's up to its hierarchy's root (found: a *_dir result)."""
    if found is None:
        return
    path, top = found
    while True:
        yield path
        if path == top or len(path) <= len(top):
            return
        path = os.path.dirname(path)


def cgroup_v1_quota(pid="self"):
    """Smallest cfs quota/period from pid's cpu cgroup up to the root."""
    found = cgroup_v1_dir("cpu", pid)
    best = None
    for path in up_from(found):
        try:
            quota = int(read(os.path.join(path, "cpu.cfs_quota_us")))
            period = int(read(os.path.join(path, "cpu.cfs_period_us")))
            if quota > 0 and period > 0:
                cores = quota / float(period)
                if best is None or cores < best["cores"]:
                    best = {"version": 1, "path": path, "quota_us": quota,
                            "period_us": period, "cores": cores,
                            "rel": path[len(found[1]):] or "/"}
        except (OSError, ValueError):
            pass
    return best


def cgroup_v2_quota(pid="self"):
    best = None
    for path in up_from(cgroup_v2_dir(pid)):
        try:
            quota, period = read(os.path.join(path, "cpu.max")).split()[:2]
            if quota != "max":
                cores = int(quota) / float(period)
                if best is None or cores < best["cores"]:
                    best = {"version": 2, "path": path, "quota_us": int(quota),
                            "period_us": int(period), "cores": cores}
        except (OSError, ValueError):
            pass
    return best
