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
# The training variables the env check compares: the host's login environment, or the job's
# container's (its image's ENV and the run's --env, as its process has them).
ENV_PREFIXES = ("NCCL_", "FLAGS_", "PADDLE_", "GLOG_", "GLOO_", "CUDA_VISIBLE_DEVICES")
# Names that look secret keep their presence, never their value: reports get shared.
SECRET_MARKERS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "_KEY", "APIKEY")


def training_env(environ):
    """{name: value} of the training variables of an environment, secrets redacted."""
    out = {}
    for k in sorted(environ):
        if k.startswith(ENV_PREFIXES):
            secret = any(m in k.upper() for m in SECRET_MARKERS)
            out[k] = "<redacted>" if secret else environ[k][:4096]
    return out


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
    through its own root), whether it shares the probe's network and IPC namespaces (host
    networking, --ipc host), the RDMA and GPU device nodes in its /dev, the GPU variables it
    was given and its training variables."""
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
        # Podman 4.3's inspect says "shareable" for --ipc host: the namespace says the truth.
        "host_ipc": os.readlink(base + "/ns/ipc") == os.readlink(proc + "/self/ns/ipc"),
        "infiniband": listing(base + "/root/dev/infiniband"),
        "nvidia": [d for d in listing(base + "/root/dev") if d.startswith("nvidia")],
        "gpu_env": dict((k, env[k]) for k in GPU_ENV if k in env),
        "env": {"vars": training_env(env)},
    }


def run_for(argv, timeout):
    """(exit code, stdout, the last line of stderr) of argv, bounded by timeout; exit code
    127 where argv[0] could not be run at all (as a shell says "not found")."""
    import subprocess
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "", "no answer within %.0f s" % timeout
    except OSError as e:
        return 127, "", "cannot run %s: %s" % (argv[0], e.strerror or e)
    err = p.stderr.decode("utf-8", "replace").strip().splitlines()
    return p.returncode, p.stdout.decode("utf-8", "replace"), (err[-1] if err else "")[:500]


def on_path(name):
    """Whether name (a command, or a path) is an executable file on this PATH."""
    dirs = [""] if "/" in name else os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep)
    return any(os.path.isfile(os.path.join(d, name)) and os.access(os.path.join(d, name),
                                                                    os.X_OK) for d in dirs)


def runtime_missing(argv, code=0, err=""):
    """Why the runtime of argv cannot run on this host (None: it ran): not on the PATH of
    the user the probe runs as, or a wrapper of it that could not run its own (exit 127)."""
    if not on_path(argv[0]):
        return "%s: not found on this host's PATH (%s)" % (
            argv[0], os.environ.get("PATH", ""))
    if code == 127:
        return "%s could not run: %s" % (argv[0], err or "exit 127")
    return None


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
    container to run in). The request's argvs are built by the controller. In the facts,
    no_runtime: the runtime cannot run here; missing: the image (or the named container) is
    not there; start_error: it did not start (the runtime's own words); unread: it runs but
    its process could not be read."""
    import json
    facts = {"runtime": req["runtime"], "image": req.get("image"), "name": req.get("name")}
    first = req.get("id") or req.get("exec")
    why = runtime_missing(first) if first else None
    if why:
        facts["no_runtime"] = why
        return facts, None
    if not req.get("inspect"):  # apptainer (entered with exec), pyxis (srun only)
        return facts, req.get("exec")
    code, out, err = run_for(req["id"], min(20.0, budget))
    why = runtime_missing(req["id"], code, err)
    if why:
        facts["no_runtime"] = why
        return facts, None
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
            facts["start_error"] = err or "exit %s" % code
            return facts, None
    code, out, err = run_for(req["inspect"], min(20.0, budget))
    if code != 0:
        facts["unread"] = "inspect: %s" % (err or "exit %s" % code)
        return facts, req["exec"]
    doc = json.loads(out)
    doc = doc[0] if isinstance(doc, list) else doc
    facts["intent"] = intent(doc)
    pid = (doc.get("State") or {}).get("Pid")
    if not pid:
        facts["unread"] = "inspect gives no process (is it running?)"
        return facts, None
    truth = process_truth(int(pid))
    truth["gpu_env"] = sorted(truth["gpu_env"].items())
    facts.update(truth)
    facts["pid"] = int(pid)
    return facts, req["exec"]


def container_stop(req):
    """Removes the container the probe started (it would go by itself when its sleep ends)."""
    if req.get("rm"):
        run_for(req["rm"], 20.0)
