# The probe's Paddle part: the training environment's Paddle, CUDA, cuDNN and NCCL, read by
# a child process of the host's (or the job's container's) python that imports Paddle
# (paddle_child.py, passed on as text: it is slow and may crash), started first so that its
# import overlaps the CPU sample, and bounded by what is left of the probe's budget.
# Joined into the probe (hostside/ship.py): standard library only, Python 3.6 syntax.
import os

# One import a line (the alias keeps isort from merging them): the join drops lines.
from preflight.hostside.procfs import parents  # joined
from preflight.hostside.ship import NVML_SRC, PADDLE_CHILD  # joined

PADDLE_MARK = "PREFLIGHT-PADDLE-JSON:"


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
    parent = parents()
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


def paddle_or_reason(python, want_nvml, inside=None):
    """(the Paddle child, None), or (None, the Paddle section when it cannot start)."""
    try:
        return start_paddle(python, want_nvml, inside), None
    except OSError as e:
        return None, {"available": False, "interpreter": python,
                      "reason": "cannot run %s: %s" % (python, e.strerror or e)}

