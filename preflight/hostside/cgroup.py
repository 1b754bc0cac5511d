# preflight's readers of cgroups (v1 and v2: where a process's cgroup is, its CPU quota, its
# memory limit's files, its freezer), shared by the shipped probe and the watch's sampler:
# standard library only, Python 3.6 syntax, joined into each text (hostside/ship.py).
import os

from preflight.hostside.procfs import read as read  # joined


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
    return found_under(under_mount(rel, mount_root, mount_point, pid), mount_point)


def cgroup_v2_dir(pid="self"):
    """(the directory of pid's cgroup v2, the cgroup2 mount point); None without one."""
    rel = None
    for line in read("/proc/%s/cgroup" % pid).splitlines():
        if line.startswith("0::"):
            rel = line[3:]
    if rel is None:
        return None
    mount_root = mount_point = None
    for line in read("/proc/self/mountinfo", 1 << 20).splitlines():
        left, _, right = line.partition(" - ")
        if right.split()[:1] == ["cgroup2"]:
            mount_root, mount_point = left.split()[3:5]
    if mount_root is None or mount_point is None:
        return None
    return found_under(under_mount(rel, mount_root, mount_point, pid), mount_point)


def found_under(path, mount_point):
    return None if path is None else (path, mount_point)


MAX_SEARCHED = 4096  # directories looked through for a cgroup a namespace hides the name of


def under_mount(rel, mount_root, mount_point, pid):
    """The directory of cgroup rel (as /proc/<pid>/cgroup names it, from this process's
    cgroup namespace) under a mount whose root is mount_root (mountinfo's fourth field, from
    the same namespace); None where that mount does not show it."""
    if mount_root == "/":
        return os.path.normpath(mount_point + "/" + rel.lstrip("/"))
    parts = mount_root.strip("/").split("/")
    if parts[0] == "..":
        # A cgroup namespace entered without a mount of its own (unshare -C, a container
        # that kept the host's /sys/fs/cgroup): the mount shows the hierarchy from that many
        # levels above the namespace's root, whose names the namespace hides. The one
        # directory at that depth that holds pid is the root.
        if any(p != ".." for p in parts):
            return None
        return holding(mount_point, len(parts), rel, os.getpid() if pid == "self" else pid)
    # A mount of a part of the hierarchy (a bind of the job's cgroup over /sys/fs/cgroup,
    # as a container without a cgroup namespace has): rel is under its root, or not shown.
    mount_root = "/" + "/".join(parts)
    if rel == mount_root or rel.startswith(mount_root + "/"):
        return os.path.normpath(mount_point + "/" + rel[len(mount_root):].lstrip("/"))
    return None


def holding(top, depth, rel, pid):
    """The directory depth levels under top, then rel, whose cgroup.procs lists pid."""
    level, searched = [top], 0
    for _ in range(depth):
        below = []  # type: list[str]
        for d in level:
            searched += 1
            if searched > MAX_SEARCHED:
                return None
            try:
                below.extend(e.path for e in os.scandir(d) if e.is_dir(follow_symlinks=False))
            except OSError:
                pass
        level = below
    for d in level[:MAX_SEARCHED]:
        path = os.path.normpath(d + "/" + rel.lstrip("/"))
        try:
            if str(pid) in read(os.path.join(path, "cgroup.procs"), 1 << 20).split():
                return path
        except OSError:
            pass
    return None


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


def freezer_files(pid="self"):
    """The files that say whether pid's cgroup is frozen: v1's freezer.state, v2's
    cgroup.events (each also says so when an ancestor froze it)."""
    out = []
    found = cgroup_v1_dir("freezer", pid)
    if found is not None:
        out.append(os.path.join(found[0], "freezer.state"))
    found = cgroup_v2_dir(pid)
    if found is not None:
        out.append(os.path.join(found[0], "cgroup.events"))
    return out


def is_frozen(files):
    """Whether a cgroup is frozen (docker pause, a Kubernetes or Slurm freeze), by its
    freezer_files: FROZEN or FREEZING (v1), "frozen 1" (v2). Its tasks then make no
    progress, though they are neither stopped nor waiting on anything of their own."""
    for path in files:
        try:
            text = read(path)
        except OSError:
            continue
        if path.endswith("freezer.state") and text.strip() in ("FROZEN", "FREEZING"):
            return True
        if any(line.split() == ["frozen", "1"] for line in text.splitlines()):
            return True
    return False
