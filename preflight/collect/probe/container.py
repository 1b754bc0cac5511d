# preflight probe, container part: what the job's container really has, read from the host
# through /proc/<pid> of its first process. `inspect` says what was asked for; this is what
# the process got (with --ipc=host, inspect reports the ShmSize asked for, while the
# container has the host's /dev/shm). It works for any runtime whose process the host can
# see (docker, podman, enroot, apptainer), as root or as the container's own user.
#
# Standard library only, Python 3.6 syntax: joined into the shipped probe like nvml.py.
import os

# /proc/<pid>/limits rows the checks read, by the names the policy uses.
LIMIT_ROWS = (("Max open files", "nofile"), ("Max locked memory", "memlock"))
GPU_ENV = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")


def proc_limits(text):
    """{"nofile": {"soft", "hard"}, "memlock": ...} of a /proc/<pid>/limits text; None is
    unlimited."""
    def value(word):
        return None if word == "unlimited" else int(word)
    out = {}
    for line in text.splitlines():
        for label, key in LIMIT_ROWS:
            if line.startswith(label):
                words = line[len(label):].split()
                out[key] = {"soft": value(words[0]), "hard": value(words[1])}
    return out


def proc_environ(data):
    """The variables of a /proc/<pid>/environ (bytes, NUL-separated) as a dict."""
    out = {}
    for item in data.split(b"\0"):
        key, eq, val = item.decode("utf-8", "replace").partition("=")
        if eq:
            out[key] = val
    return out


def listing(path):
    """The entries of a directory, sorted; [] where it does not exist."""
    try:
        return sorted(os.listdir(path))
    except (FileNotFoundError, NotADirectoryError):
        return []


def process_truth(pid, proc="/proc"):
    """What the process pid runs with: limits, /dev/shm (its size as the process sees it,
    through its own root), whether it shares the probe's network namespace (host
    networking), the RDMA and GPU device nodes in its /dev, and the GPU variables it was
    given."""
    base = "%s/%d" % (proc, pid)
    with open(base + "/limits") as f:
        limits = proc_limits(f.read())
    with open(base + "/environ", "rb") as f:
        env = proc_environ(f.read(1 << 20))
    try:
        st = os.statvfs(base + "/root/dev/shm")
        shm = {"size_bytes": st.f_blocks * st.f_frsize,
               "free_bytes": st.f_bavail * st.f_frsize}  # type: dict
    except OSError as e:
        shm = {"error": "/dev/shm: %s" % (e.strerror or e)}
    return {
        "limits": limits,
        "shm": shm,
        "host_network": os.readlink(base + "/ns/net") == os.readlink(proc + "/self/ns/net"),
        "infiniband": listing(base + "/root/dev/infiniband"),
        "nvidia": [d for d in listing(base + "/root/dev") if d.startswith("nvidia")],
        "gpu_env": dict((k, env[k]) for k in GPU_ENV if k in env),
    }
