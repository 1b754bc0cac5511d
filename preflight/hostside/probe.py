# preflight probe: collects the facts of one host and prints them as one JSON document.
#
# Shipped to each host and run there with the host's python3, so: standard library only,
# syntax kept to Python 3.6 (tests parse it with feature_version=(3, 6)), every section
# guarded so a failure becomes {"error": ...} in that section instead of a crash.
# The probe decides nothing: it reports; the controller judges.
#
# This file holds the entry point and the system, files and environment sections; the fact
# families are parts of their own (probe_cpu, probe_net, probe_gpu, probe_paddle, on procfs,
# cgroup, container, gpu and nvml). They are one text on the hosts: hostside/ship.py joins
# the parts that the lines marked "# joined" import, theirs first, and leaves those lines out
# (their functions and the sources passed on are defined in the one text there).
#
# It runs on every host of every check, so its start-up is kept small: only cheap C modules
# are imported up front; json, socket, subprocess and hashlib (each pulling in re, enum or
# threading: ~10 ms of CPU together) only on the paths that need them.
import os
import sys
import time

# One import a line (the alias keeps isort from merging them): the join drops lines.
from preflight.hostside.container import container_start as container_start  # joined
from preflight.hostside.container import container_stop as container_stop  # joined
from preflight.hostside.container import training_env  # joined
from preflight.hostside.probe_cpu import cpu_facts as cpu_facts  # joined
from preflight.hostside.probe_cpu import cpu_sample_start as cpu_sample_start  # joined
from preflight.hostside.probe_cpu import limits_facts as limits_facts  # joined
from preflight.hostside.probe_cpu import memory_facts as memory_facts  # joined
from preflight.hostside.probe_cpu import process_cgroup as process_cgroup  # joined
from preflight.hostside.probe_cpu import shm_facts as shm_facts  # joined
from preflight.hostside.probe_cpu import tmp_facts  # joined
from preflight.hostside.probe_gpu import gpu_facts as gpu_facts  # joined
from preflight.hostside.probe_gpu import local_pynvml  # joined
from preflight.hostside.probe_net import listening_ports as listening_ports  # joined
from preflight.hostside.probe_net import network_facts  # joined
from preflight.hostside.probe_paddle import finish_paddle as finish_paddle  # joined
from preflight.hostside.probe_paddle import paddle_or_reason  # joined
from preflight.hostside.procfs import read as read  # joined
from preflight.hostside.procfs import section as section  # joined

SCHEMA = 1


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
