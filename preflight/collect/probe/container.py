# preflight probe, container part: what the job's container really has, read from the host
# through /proc/<pid> of its first process. `inspect` says what was asked for; this is what
# the process got (with --ipc=host, inspect reports the ShmSize asked for, while the
# container has the host's /dev/shm). It works for any runtime whose process the host can
# see (docker, podman, enroot, apptainer), as root or as the container's own user.
#
# Standard library only, Python 3.6 syntax: joined into the shipped probe like nvml.py.
import os
import time

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


def run_for(argv, timeout):
    """(exit code, stdout, the last line of stderr) of argv, bounded by timeout."""
    import subprocess
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "", "no answer within %.0f s" % timeout
    except OSError as e:
        return None, "", "cannot run %s: %s" % (argv[0], e.strerror or e)
    err = p.stderr.decode("utf-8", "replace").strip().splitlines()
    return p.returncode, p.stdout.decode("utf-8", "replace"), (err[-1] if err else "")[:500]


def intent(doc):
    """What inspect says the container was asked for (docker's and podman's shapes)."""
    hc = doc.get("HostConfig") or {}
    devices = [d.get("PathOnHost") for d in hc.get("Devices") or [] if isinstance(d, dict)]
    gpus = []
    for r in hc.get("DeviceRequests") or []:  # docker --gpus
        if isinstance(r, dict) and any("gpu" in c for caps in r.get("Capabilities") or []
                                       for c in caps):
            ids = r.get("DeviceIDs") or []
            gpus.append(",".join(ids) if ids else "count=%s" % r.get("Count"))
    shm = hc.get("ShmSize")
    return {"network_mode": hc.get("NetworkMode"), "ipc_mode": hc.get("IpcMode"),
            "shm_size_bytes": shm if isinstance(shm, int) else None,
            "devices": [d for d in devices if isinstance(d, str)], "gpu_requests": gpus}


def container_start(req, budget):
    """Starts (or finds) the job's container as the request says, and reads it: returns
    (its facts, the argv prefix that runs a command inside it, or None where there is no
    container to run in). The request's argvs are built by the controller."""
    import json
    facts = {"runtime": req["runtime"], "image": req.get("image"), "name": req.get("name")}
    if not req.get("inspect"):  # apptainer (entered with exec), pyxis (srun only)
        facts["error"] = "%s has no inspect: the container's settings are not read" \
            % req["runtime"]
        return facts, req.get("exec")
    code, out, err = run_for(req["id"], min(20.0, budget))
    if code != 0 or not out.strip():
        facts["missing"] = err or "exit %s" % code
        return facts, None
    image_id = out.strip().splitlines()[0]
    # Docker writes the algorithm before the digest, Podman does not: one form to compare.
    facts["image_id"] = image_id if ":" in image_id else "sha256:" + image_id
    if req.get("start"):
        began = time.time()
        code, out, err = run_for(req["start"], budget)
        facts["start_s"] = round(time.time() - began, 3)
        if code != 0:
            facts["error"] = "did not start: %s" % (err or "exit %s" % code)
            return facts, None
    code, out, err = run_for(req["inspect"], min(20.0, budget))
    if code != 0:
        facts["error"] = "inspect: %s" % (err or "exit %s" % code)
        return facts, req["exec"]
    doc = json.loads(out)
    doc = doc[0] if isinstance(doc, list) else doc
    facts["intent"] = intent(doc)
    pid = (doc.get("State") or {}).get("Pid")
    if not pid:
        facts["error"] = "inspect gives no process (is it running?)"
        return facts, None
    truth = process_truth(int(pid))
    truth["gpu_env"] = sorted(truth["gpu_env"].items())
    facts.update(truth)
    return facts, req["exec"]


def container_stop(req):
    """Removes the container the probe started (it would go by itself when its sleep ends)."""
    if req.get("rm"):
        run_for(req["rm"], 20.0)
