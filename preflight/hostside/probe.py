# preflight probe: collects the facts of one host and prints them as one JSON document.
#
# Shipped to each host and run there with the host's python3, so: standard library only,
# syntax kept to Python 3.6 (tests parse it with feature_version=(3, 6)), every section
# guarded so a failure becomes {"error": ...} in that section instead of a crash.
# The probe decides nothing: it reports; the controller judges.
#
# This file and the other parts (cgroup.py, container.py, gpu.py, nvml.py, paddle_child.py)
# are one text on the hosts (hostside/ship.py joins them): the lines marked "# joined" are how
# this file finds the others as modules of the package, and the join leaves them out (their
# functions and the two sources are defined in the one text there).
#
# It runs on every host of every check, so its start-up is kept small: only cheap C modules
# are imported up front; json, socket, subprocess and hashlib (each pulling in re, enum or
# threading: ~10 ms of CPU together) only on the paths that need them.
import os
import resource
import struct
import sys
import time

# One import a line (the alias keeps isort from merging them): the join drops lines.
from preflight.hostside.cgroup import cgroup_v1_dir as cgroup_v1_dir  # joined
from preflight.hostside.cgroup import cgroup_v1_quota as cgroup_v1_quota  # joined
from preflight.hostside.cgroup import cgroup_v2_dir as cgroup_v2_dir  # joined
from preflight.hostside.cgroup import cgroup_v2_quota as cgroup_v2_quota  # joined
from preflight.hostside.cgroup import read as read  # joined
from preflight.hostside.cgroup import section as section  # joined
from preflight.hostside.cgroup import up_from  # joined
from preflight.hostside.container import container_start as container_start  # joined
from preflight.hostside.container import container_stop, training_env  # joined
from preflight.hostside.gpu import has_driver as has_driver  # joined
from preflight.hostside.gpu import import_pynvml as import_pynvml  # joined
from preflight.hostside.gpu import smi_fields_after as smi_fields_after  # joined
from preflight.hostside.gpu import which  # joined
from preflight.hostside.nvml import nvml_facts  # joined
from preflight.hostside.ship import NVML_SRC, PADDLE_CHILD  # joined

SCHEMA = 1
PADDLE_MARK = "PREFLIGHT-PADDLE-JSON:"


# ---------------------------------------------------------------- system
def system_facts():
    os_name = None
    try:
        for line in read("/etc/os-release").splitlines():
            if line.startswith("PRETTY_NAME="):
                os_name = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    u = os.uname()
    return {
        "hostname": u.nodename,  # what gethostname() returns on Linux
        "kernel": u.release,
        "arch": u.machine,
        "os": os_name or u.sysname,
        "python": "%d.%d.%d" % tuple(sys.version_info[:3]),
        "python_executable": sys.executable,
    }


# ---------------------------------------------------------------- cpu
def cpu_times():
    for line in read("/proc/stat").splitlines():
        if line.startswith("cpu "):
            vals = [int(x) for x in line.split()[1:]]
            idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
            return sum(vals[:8]), idle
    raise ValueError("no cpu line in /proc/stat")


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
    tick = float(os.sysconf("SC_CLK_TCK"))

    def host():
        busy = 0
        for line in read("/proc/stat").splitlines():
            name = line.split(" ", 1)[0]
            if name.startswith("cpu") and name != "cpu" and (mine is None or name in mine):
                vals = [int(x) for x in line.split()[1:9]]
                busy += sum(vals) - vals[3] - (vals[4] if len(vals) > 4 else 0)
        return busy / tick
    return "host", host


def own_cpu_s(child_pids):
    """CPU seconds used by this probe and its children, including a child not yet waited
    for (the Paddle import runs during the sample): not other work."""
    t = os.times()
    total = t[0] + t[1] + t[2] + t[3]
    tick = float(os.sysconf("SC_CLK_TCK"))
    for pid in child_pids:
        try:
            f = read("/proc/%d/stat" % pid).rsplit(")", 1)[1].split()
            total += sum(int(x) for x in f[11:15]) / tick  # utime stime cutime cstime
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
            for line in read(path).splitlines():
                if line.startswith("some "):
                    for kv in line.split()[1:]:
                        k, _, v = kv.partition("=")
                        if k == "avg10":
                            return {"some_avg10": float(v), "source": path}
        except (OSError, ValueError):
            continue
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
    info = {}
    for line in read("/proc/meminfo").splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts:
            info[key] = int(parts[0]) * 1024
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


# ---------------------------------------------------------------- network
def ip_addresses():
    """Addresses per interface, as `ip -j addr` gives them: from the kernel over rtnetlink
    (no child process), else from `ip -j addr` itself."""
    try:
        return netlink_addresses()
    except Exception:
        pass
    import json
    import subprocess
    out = subprocess.check_output(["ip", "-j", "addr", "show"], stderr=subprocess.DEVNULL,
                                  timeout=5)
    result = {}
    for link in json.loads(out.decode("utf-8", "replace")):
        result[link.get("ifname")] = [
            "%s/%s" % (a.get("local"), a.get("prefixlen")) for a in link.get("addr_info", [])
        ]
    return result


NETLINK_ROUTE, RTM_GETADDR, NLMSG_DONE, NLMSG_ERROR = 0, 22, 3, 2
IFA_ADDRESS, IFA_LOCAL = 1, 2
NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY, TCP_LISTEN = 4, 20, 10


def netlink_dump(protocol, request):
    """The messages of one netlink dump: [(type, payload)] until NLMSG_DONE. `_socket` is
    the C module under `socket`: the same calls without the ~4 ms of enum classes `socket`
    builds at import."""
    import _socket
    s = _socket.socket(_socket.AF_NETLINK, _socket.SOCK_RAW, protocol)
    try:
        s.settimeout(2.0)
        s.bind((0, 0))
        s.sendto(request, (0, 0))
        out = []  # type: list
        for _ in range(10000):  # a dump ends with NLMSG_DONE; the bound guards a bad kernel
            data = s.recv(1 << 16)
            if not data:
                raise RuntimeError("netlink dump ended without NLMSG_DONE")
            pos = 0
            while pos + 16 <= len(data):
                length, kind = struct.unpack_from("=IH", data, pos)
                if length < 16:
                    raise RuntimeError("bad netlink message length %d" % length)
                if kind == NLMSG_DONE:
                    return out
                if kind == NLMSG_ERROR:
                    raise RuntimeError("netlink error %d" % struct.unpack_from("=i", data,
                                                                              pos + 16)[0])
                out.append((kind, data[pos + 16:pos + length]))
                pos += (length + 3) & ~3
        raise RuntimeError("netlink dump too long")
    finally:
        s.close()


def netlink_addresses():
    """One RTM_GETADDR dump over rtnetlink: {interface: ["address/prefix", ...]}."""
    import _socket
    af_inet, af_inet6 = _socket.AF_INET, _socket.AF_INET6
    names = dict(_socket.if_nameindex())
    # nlmsghdr (len, type, flags REQUEST|DUMP, seq, pid) + ifaddrmsg for every family
    request = struct.pack("=IHHII", 24, RTM_GETADDR, 0x301, 1, 0) + bytes(8)
    by_index = {}  # type: dict
    for kind, msg in netlink_dump(NETLINK_ROUTE, request):
        if kind != 20 or len(msg) < 8:  # RTM_NEWADDR
            continue
        family, prefix, _, _, index = struct.unpack_from("=BBBBI", msg, 0)
        attrs, at = {}, 8
        while at + 4 <= len(msg):
            alen, atype = struct.unpack_from("=HH", msg, at)
            if alen < 4:
                break
            attrs[atype] = msg[at + 4:at + alen]
            at += (alen + 3) & ~3
        raw = attrs.get(IFA_LOCAL, attrs.get(IFA_ADDRESS))
        if raw is not None and family in (af_inet, af_inet6):
            addr = _socket.inet_ntop(family, raw)
            by_index.setdefault(index, []).append("%s/%d" % (addr, prefix))
    return dict((names.get(i, str(i)), a) for i, a in by_index.items())


def netlink_listening():
    """Ports of listening TCP sockets (IPv4 and IPv6), asked of the kernel by state over
    NETLINK_SOCK_DIAG (what `ss -lt` does): reading /proc/net/tcp walks the whole TCP hash
    table, 4.5 ms a file on a machine with a large one, most of the probe's own CPU."""
    import _socket
    ports = set()
    for family in (_socket.AF_INET, _socket.AF_INET6):
        # nlmsghdr + inet_diag_req_v2 (family, protocol, ext, pad, states, a zero sockid)
        req = struct.pack("=BBBxI", family, _socket.IPPROTO_TCP, 0, 1 << TCP_LISTEN) + \
            bytes(48)
        head = struct.pack("=IHHII", 16 + len(req), SOCK_DIAG_BY_FAMILY, 0x301, 1, 0)
        for kind, msg in netlink_dump(NETLINK_SOCK_DIAG, head + req):
            # inet_diag_msg: family, state, timer, retrans, then the sockid (sport first)
            if kind == SOCK_DIAG_BY_FAMILY and len(msg) >= 6 and msg[1] == TCP_LISTEN:
                ports.add(struct.unpack_from(">H", msg, 4)[0])
    return ports


RTM_GETNEIGHTBL, RTM_NEWNEIGHTBL = 66, 64
NEIGH_FAMILIES = {2: "ipv4", 10: "ipv6"}  # AF_INET's arp_cache, AF_INET6's ndisc_cache


def neighbour_tables():
    """The kernel's neighbour tables (ARP, IPv6 neighbours) over rtnetlink, as `ip -s ntable`
    shows them: limits (gc_thresh1-3), entries, how often it was full, and its hash seed, a
    random number per table that tells hosts sharing one kernel (namespaces, containers:
    one table, one limit) apart from hosts with their own. Read in a network namespace too,
    where /proc/sys has no neigh/default."""
    request = struct.pack("=IHHII", 20, RTM_GETNEIGHTBL, 0x301, 1, 0) + bytes(4)
    out = []
    for kind, msg in netlink_dump(NETLINK_ROUTE, request):
        if kind != RTM_NEWNEIGHTBL or len(msg) < 4 or msg[0] not in NEIGH_FAMILIES:
            continue
        attrs, at = {}, 4
        while at + 4 <= len(msg):
            alen, atype = struct.unpack_from("=HH", msg, at)
            if alen < 4:
                break
            attrs[atype & 0x3fff] = msg[at + 4:at + alen]
            at += (alen + 3) & ~3
        if not all(k in attrs and len(attrs[k]) >= 4 for k in (2, 3, 4)):
            continue  # a device's parameters, not the table's
        config, stats = attrs.get(5, b""), attrs.get(7, b"")
        out.append({
            "family": NEIGH_FAMILIES[msg[0]],
            "thresh1": struct.unpack_from("=I", attrs[2])[0],
            "thresh2": struct.unpack_from("=I", attrs[3])[0],
            "thresh3": struct.unpack_from("=I", attrs[4])[0],
            "entries": struct.unpack_from("=I", config, 4)[0] if len(config) >= 8 else None,
            "table_id": struct.unpack_from("=I", config, 16)[0] if len(config) >= 20 else None,
            "table_fulls": struct.unpack_from("=Q", stats, 80)[0] if len(stats) >= 88
            else None,
        })
    return out


def network_facts():
    addrs = section(ip_addresses)
    interfaces = []
    base = "/sys/class/net"
    for name in sorted(os.listdir(base)):
        d = os.path.join(base, name)

        def attr(n, d=d):
            try:
                return read(os.path.join(d, n)).strip()
            except OSError:  # speed raises EINVAL on links without one
                return None
        mtu, speed = attr("mtu"), attr("speed")
        interfaces.append({
            "name": name,
            "mtu": int(mtu) if mtu and mtu.isdigit() else None,
            "state": attr("operstate"),
            "speed_mbps": int(speed) if speed and speed.lstrip("-").isdigit()
            and int(speed) > 0 else None,
            "addresses": addrs.get(name, []) if isinstance(addrs, dict)
            and "error" not in addrs else [],
        })
    return {"interfaces": interfaces, "default_route": section(default_route_interface),
            "infiniband": section(infiniband_devices), "ib_ports": section(infiniband_ports),
            "reached_at": reached_at(), "neighbours": section(neighbour_tables)}


def reached_at():
    """The address SSH reached this host at (sshd's SSH_CONNECTION: client ip, port, server
    ip, port): the host's own address on the cluster's network, also through a bastion and
    when the controller cannot resolve the host's name."""
    parts = os.environ.get("SSH_CONNECTION", "").split()
    return parts[2] if len(parts) == 4 else None


def listening_ports():
    try:
        return {"tcp": sorted(netlink_listening())}
    except Exception:
        pass  # no sock_diag (an old or locked-down kernel): the files, slower
    ports = set()
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            text = read(path, 8 << 20)
        except OSError:
            continue
        for line in text.splitlines()[1:]:
            parts = line.split()
            if len(parts) > 3 and parts[3] == "0A":  # TCP_LISTEN
                ports.add(int(parts[1].rsplit(":", 1)[1], 16))
    return {"tcp": sorted(ports)}


def default_route_interface():
    for line in read("/proc/net/route").splitlines()[1:]:
        parts = line.split()
        if len(parts) > 2 and parts[1] == "00000000":
            return parts[0]
    return None


def infiniband_devices():
    try:
        return sorted(os.listdir("/sys/class/infiniband"))
    except OSError:
        return []


def infiniband_ports(root="/sys/class/infiniband"):
    """Every RDMA port: its state ("4: ACTIVE"), rate ("200 Gb/sec (4X HDR)") and link layer
    (InfiniBand, or Ethernet for RoCE), as the kernel shows them to any user."""
    def attr(path):
        try:
            return read(path, 256).strip() or None
        except OSError:
            return None
    out = []  # type: list
    try:
        devices = sorted(os.listdir(root))
    except OSError:
        return out
    for dev in devices[:64]:
        try:
            ports = sorted(os.listdir(os.path.join(root, dev, "ports")),
                           key=lambda p: int(p) if p.isdigit() else 0)
        except OSError:
            continue
        for port in ports[:16]:
            base = os.path.join(root, dev, "ports", port)
            state = attr(os.path.join(base, "state"))
            out.append({"device": dev, "port": int(port) if port.isdigit() else 0,
                        "state": state.split(":", 1)[-1].strip() if state else None,
                        "rate": attr(os.path.join(base, "rate")),
                        "link_layer": attr(os.path.join(base, "link_layer"))})
    return out


# ---------------------------------------------------------------- files
def files_facts(paths):
    """sha256 of each file the job needs (script, configs): they must match on every host."""
    out = {}
    if paths:
        import hashlib
    for path in paths:
        full = os.path.expanduser(path)
        try:
            h = hashlib.sha256()
            size = 0
            with open(full, "rb") as f:
                while True:
                    chunk = f.read(1 << 20)
                    if not chunk:
                        break
                    size += len(chunk)
                    h.update(chunk)
            out[path] = {"sha256": h.hexdigest(), "size": size}
        except OSError as e:
            out[path] = {"error": "%s: %s" % (type(e).__name__, e.strerror or e)}
    return {"files": out}


# ---------------------------------------------------------------- environment
def env_facts():
    return {"vars": training_env(os.environ)}


# ---------------------------------------------------------------- GPUs


SMI_FIELDS = ("index,name,uuid,memory.total,compute_cap,driver_version,vbios_version,"
              "ecc.mode.current,mig.mode.current,persistence_mode,power.limit,"
              "pcie.link.width.current,pcie.link.width.max")
# GPU health as nvidia-smi reports it, in the same terms as NVML's (collect/smi.py reads both):
# where the training environment lacks nvidia-ml-py, nvidia-smi is the only way to see a GPU
# with uncorrectable ECC errors, a pending page retirement or row remapping, or a slowdown.
SMI_HEALTH = ("ecc.errors.uncorrected.volatile.total,retired_pages.pending,"
              "remapped_rows.pending,remapped_rows.failure,clocks_event_reasons.active")
# A field the driver's nvidia-smi does not know fails the whole query: gpu.py's
# smi_fields_after says what to ask for instead.
# Older nvidia-smi releases reject unknown fields (compute_cap came in 11.6-era drivers).
SMI_FIELDS_BASIC = "index,name,uuid,memory.total,driver_version"


def smi_query(smi, query, fmt):
    import subprocess
    p = subprocess.Popen([smi, query, "--format=" + fmt], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        out, err = p.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        return None, "nvidia-smi %s did not answer within 20 s" % query.split("=")[0]
    if p.returncode != 0:
        # stderr apart: a warning there (a GPU nvidia-smi cannot reach) is not a CSV row.
        return None, (err + out).decode("utf-8", "replace").strip()[:300]
    return out.decode("utf-8", "replace"), None


def smi_facts(smi):
    fields = (SMI_FIELDS + "," + SMI_HEALTH).split(",")
    basic = SMI_FIELDS_BASIC.split(",")
    last = ""
    for _ in range(len(fields) + 2):  # bounded: each failure drops a field or ends
        out, last = smi_query(smi, "--query-gpu=" + ",".join(fields), "csv,noheader,nounits")
        if out is not None:
            facts = {"source": "nvidia-smi", "csv_fields": ",".join(fields),
                     "csv": out[:65536]}
            apps, _ = smi_query(smi, "--query-compute-apps=gpu_uuid", "csv,noheader")
            facts["apps"] = None if apps is None else apps[:65536]
            return facts
        again = smi_fields_after(fields, last, basic)
        if again is not None:
            fields = again
        elif fields != basic:
            fields = list(basic)
        else:
            break
    raise RuntimeError("nvidia-smi failed: %s" % last)


def local_pynvml():
    # site-packages (where pynvml usually is) only on a host with an NVIDIA driver.
    try:
        return import_pynvml(add_site=has_driver())
    except Exception:
        return None


XID_LINE = r"NVRM: Xid \(([^)]*)\): (\d+),\s*(.*)"


def xid_events(text=None):
    """The NVRM Xid lines of the kernel log since boot, [pci, code, text] each; or why the log
    could not be read (dmesg_restrict keeps it from users other than root)."""
    import re  # only on GPU hosts (see the imports above)
    pattern = re.compile(XID_LINE)
    if text is None:
        import subprocess
        try:
            p = subprocess.run(["dmesg"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=5)
        except Exception as e:
            return {"error": "dmesg: %s" % e}
        if p.returncode != 0:
            why = p.stderr.decode("utf-8", "replace").strip().splitlines()
            return {"error": "kernel log not readable: %s" % (why[-1][:200] if why else
                                                            "exit %d" % p.returncode)}
        text = p.stdout.decode("utf-8", "replace")
    events = []
    for line in text.splitlines():
        m = pattern.search(line)
        if m:
            events.append([m.group(1)[:64], int(m.group(2)), m.group(3).strip()[:160]])
    return {"events": events[-200:]}


def gpu_facts(pynvml, paddle):
    """GPUs (see gpu_source), and on a host with GPUs the Xid events of its kernel log."""
    facts = gpu_source(pynvml, paddle)
    if facts.get("devices") or facts.get("csv"):
        facts["xid"] = xid_events()
    return facts


def gpu_source(pynvml, paddle):
    """GPUs by NVML (here or in the training env's child), else nvidia-smi, else none."""
    errors = []
    if pynvml is not None:
        try:
            return nvml_facts(pynvml)
        except Exception as e:
            errors.append("NVML: %s: %s" % (type(e).__name__, e))
    child = paddle.get("nvml") if isinstance(paddle, dict) else None
    if isinstance(child, dict):
        if "error" not in child:
            return child
        errors.append("NVML in %s: %s" % (paddle.get("interpreter"), child["error"]))
    smi = which("nvidia-smi")
    if smi:
        return smi_facts(smi)
    if has_driver():
        # A driver without a working NVML or nvidia-smi is a broken install, not "no GPU".
        raise RuntimeError("NVIDIA driver present but no usable NVML or nvidia-smi (%s)"
                           % "; ".join(errors or ["pynvml not installed"]))
    return {"source": "none", "devices": []}


# ---------------------------------------------------------------- paddle
def start_paddle(python, want_nvml, inside=None):
    """Starts the Paddle child: with the host's python, or inside the job's container (inside:
    the argv prefix that runs a command there), where the variables go through `env`."""
    import subprocess
    quiet = {"PYTHONDONTWRITEBYTECODE": "1", "GLOG_minloglevel": "3"}
    argv = [python, "-c", PADDLE_CHILD, PADDLE_MARK, "1" if want_nvml else "0", NVML_SRC]
    if inside:
        argv = list(inside) + ["env"] + ["%s=%s" % kv for kv in sorted(quiet.items())] + argv
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(os.environ, **quiet))


def kill_tree(proc):
    """SIGKILLs proc and every process descended from it."""
    import signal
    parent = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name) as fh:
                    stat = fh.read()
            except OSError:
                continue
            parent[int(name)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, grew = {proc.pid}, True
    while grew:
        more = {p for p, pp in parent.items() if pp in tree} - tree
        tree |= more
        grew = bool(more)
    for pid in sorted(tree - {proc.pid}):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    proc.kill()


def finish_paddle(proc, python, budget):
    import json
    import subprocess
    try:
        out, err = proc.communicate(timeout=budget)
    except subprocess.TimeoutExpired:
        # A wrapper interpreter (a conda or module shim) may have children holding the
        # pipes: all of them go. (Not a session of its own: the host's `timeout` and a hangup
        # must still reach the import with the probe.)
        kill_tree(proc)
        try:
            proc.communicate(timeout=2)
        except subprocess.TimeoutExpired:  # a child started since holds the pipes still
            pass
        # Said with its remedy: imports that slow are a shared filesystem read by every host
        # at once, or a loaded host, not a broken Paddle.
        raise RuntimeError("%s did not finish importing paddle within %.0f s (what was left "
                           "of --deadline)" % (python, budget)) from None
    text = out.decode("utf-8", "replace")
    for line in text.splitlines():
        if line.startswith(PADDLE_MARK):
            data = json.loads(line[len(PADDLE_MARK):])
            data["interpreter"] = python
            return data
    tail = err.decode("utf-8", "replace").strip().splitlines()[-3:]
    raise RuntimeError("%s exited %s without a result: %s" % (python, proc.returncode,
                                                              " | ".join(tail)[:500]))


def to_json(obj):
    """json.dumps(obj, sort_keys=True), without importing json and the re it pulls in."""
    try:
        from _json import encode_basestring_ascii as quote
    except ImportError:  # not CPython
        import json
        return json.dumps(obj, sort_keys=True)
    parts = []

    def emit(o):
        if isinstance(o, str):
            parts.append(quote(o))
        elif o is None or o is True or o is False:
            parts.append({None: "null", True: "true", False: "false"}[o])
        elif isinstance(o, int):
            parts.append(int.__repr__(o))
        elif isinstance(o, float):  # JSON has no NaN or infinity
            parts.append(float.__repr__(o) if o == o and abs(o) != float("inf") else "null")
        elif isinstance(o, dict):
            parts.append("{")
            for i, k in enumerate(sorted(o, key=str)):
                parts.append(", " if i else "")
                parts.append(quote(str(k)) + ": ")
                emit(o[k])
            parts.append("}")
        elif isinstance(o, (list, tuple)):
            parts.append("[")
            for i, v in enumerate(o):
                parts.append(", " if i else "")
                emit(v)
            parts.append("]")
        else:
            parts.append(quote(str(o)))
    emit(obj)
    return "".join(parts)


def paddle_or_reason(python, want_nvml, inside=None):
    """(the Paddle child, None), or (None, the Paddle section when it cannot start)."""
    try:
        return start_paddle(python, want_nvml, inside), None
    except OSError as e:
        return None, {"available": False, "interpreter": python,
                      "reason": "cannot run %s: %s" % (python, e.strerror or e)}


def main(argv):
    args = {"--python": "python3", "--sample": "0.5", "--budget": "60", "--container": ""}
    files = []
    want_paddle = True
    it = iter(argv)
    for a in it:
        if a == "--file":
            files.append(next(it, ""))
        elif a == "--no-paddle":
            want_paddle = False
        elif a in args:
            args[a] = next(it, args[a])
    budget = float(args["--budget"])
    python = args["--python"]
    started = time.time()
    paddle_proc = None
    pynvml = local_pynvml()
    container = inside = None
    if args["--container"]:
        # The job runs in a container: its Paddle is the one to judge. It is started as the
        # job would be (the controller built the command lines), read, and removed at the end.
        import json
        container = json.loads(args["--container"])
        python = container.get("python") or python  # the training environment's, inside
        got = section(container_start, container, budget / 2)
        facts, inside = got if isinstance(got, tuple) else (got, None)  # raised: an error
        if facts.get("pid"):
            facts["cgroup"] = section(process_cgroup, facts.pop("pid"))
    if not want_paddle:
        paddle = {"error": "not collected (preflight ran with --no-paddle)"}  # type: object
    elif container is not None and inside is None:
        what = container.get("name") or container.get("image")
        why = facts.get("no_runtime") or facts.get("missing") or facts.get("start_error") \
            if isinstance(facts, dict) else None
        paddle = {"error": "not read: the job's container (%s) did not start here%s" % (
            what, ": " + why if why else "")} if container.get("inspect") or why else {
            "error": "not read: under %s the job's image is entered only by the job's own "
                     "step (srun --container-image), not from the host" % container["runtime"]}
    elif container is None:
        paddle_proc, paddle = paddle_or_reason(python, pynvml is None)
    # In a container, the Paddle child runs under the runtime, not as this probe's child:
    # started during the CPU sample, its import would count as other work on the host.
    children = [paddle_proc.pid] if paddle_proc is not None else []
    first = cpu_sample_start(children)
    doc = {"schema": SCHEMA, "started": started}  # type: dict
    doc["system"] = section(system_facts)
    doc["memory"] = section(memory_facts)
    doc["shm"] = section(shm_facts)
    doc["tmp"] = section(tmp_facts)
    doc["limits"] = section(limits_facts)
    doc["network"] = section(network_facts)
    doc["ports"] = section(listening_ports)
    doc["env"] = section(env_facts)
    doc["files"] = section(files_facts, [f for f in files if f])
    # The CPU sample ends here; the Paddle import runs meanwhile in its child process.
    doc["cpu"] = section(cpu_facts, float(args["--sample"]), first, children)
    if inside is not None and want_paddle:
        paddle_proc, paddle = paddle_or_reason(python, pynvml is None, inside)
    if paddle_proc is not None:
        left = max(1.0, budget - (time.time() - started) - 2.0)
        paddle = section(finish_paddle, paddle_proc, python, left)
    if container is not None:
        container_stop(container)
        doc["container"] = facts
    doc["paddle"] = paddle
    doc["gpu"] = section(gpu_facts, pynvml, paddle)
    if isinstance(paddle, dict):
        paddle.pop("nvml", None)
    doc["clock"] = {"epoch": time.time(), "monotonic": time.monotonic()}
    doc["elapsed_s"] = round(time.time() - started, 3)
    sys.stdout.write(to_json(doc) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    # Hosts get this script on stdin (`python3 - ARGS`): no file is written there.
    sys.exit(main(sys.argv[1:]))
