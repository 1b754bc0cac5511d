"""A short parameter-server job, shipped to every host of a PS plan and run by Paddle's own
launcher there (Python 3.8+ as Paddle 2.6 needs, standard library and Paddle). A synthetic
model: a sparse embedding sharded over the servers and a small dense part, trained for a
bounded time in async (or GEO) mode. Writes, in --dir:
- ps-trainer-<index>.json: its steps, their median and total time, and how much of it the
  stepping thread spent off the CPU (waiting on pulls and pushes, or for a core);
- ps-server-<pid>.json, rewritten every half second while the server runs (by a sampler
  forked before Paddle is imported): its CPU time, its cgroup's throttling and the host's
  bytes in and out, first and latest.
The trainers meet at a barrier and the first stops the servers (the launcher never does)."""

import argparse
import json
import os
import time


def _write(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(doc, fh)
    os.replace(tmp, path)


def _cpu_s(pid):
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / float(os.sysconf("SC_CLK_TCK"))


def _cgroup_stat():
    """(times throttled, seconds throttled) of the process's CPU cgroup, v1 or v2."""
    try:
        lines = open("/proc/self/cgroup").read().splitlines()
    except OSError:
        return None, None
    for line in lines:
        _, ctrl, path = line.split(":", 2)
        if ctrl == "":
            stat, unit = "/sys/fs/cgroup%s/cpu.stat" % path, 1e6  # v2: throttled_usec
        elif "cpu" in ctrl.split(","):
            stat, unit = "/sys/fs/cgroup/%s%s/cpu.stat" % (ctrl, path), 1e9  # v1: ns
        else:
            continue
        try:
            kv = dict(x.split() for x in open(stat).read().splitlines() if " " in x)
        except OSError:
            continue
        took = kv.get("throttled_usec", kv.get("throttled_time"))
        return int(kv.get("nr_throttled", 0)), int(took or 0) / unit
    return None, None


def _net_bytes():
    rx = tx = 0
    for line in open("/proc/self/net/dev").read().splitlines()[2:]:
        name, data = line.split(":", 1)
        if name.strip() == "lo":
            continue
        f = data.split()
        rx, tx = rx + int(f[0]), tx + int(f[8])
    return rx, tx


def _sample(pid):
    nr, took = _cgroup_stat()
    rx, tx = _net_bytes()
    return {"at": time.time(), "cpu_s": _cpu_s(pid), "throttled": nr, "throttled_s": took,
            "rx_bytes": rx, "tx_bytes": tx}


def start_sampler(directory):
    """Forks a sampler of this server from outside it (its cgroup and network namespace, its
    CPU from /proc): a thread of the server itself stops once run_server holds the GIL in
    C++. It writes every half second and ends within one of the server's end."""
    pid = os.getpid()
    path = os.path.join(directory, "ps-server-%d.json" % pid)
    if os.fork() != 0:
        return
    try:
        first = _sample(pid)
        while os.getppid() == pid:
            _write(path, {"role": "server", "pid": pid, "first": first,
                          "last": _sample(pid)})
            time.sleep(0.5)
    except Exception:
        pass  # the server is gone between two samples: the last one written stands
    finally:
        os._exit(0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rows", type=int, default=100000)
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--mode", default="async", choices=("async", "geo"))
    ap.add_argument("--dir", required=True)
    a = ap.parse_args()
    role = os.environ.get("TRAINING_ROLE") or os.environ.get("PADDLE_ROLE") or ""
    if role.upper() == "PSERVER":
        start_sampler(a.dir)
    import numpy as np
    import paddle
    import paddle.distributed.fleet as fleet
    paddle.enable_static()
    fleet.init()
    ids = paddle.static.data("ids", [None, 1], "int64")
    y = paddle.static.data("y", [None, 1], "float32")
    if a.mode == "geo":
        # GEO sends each trainer's deltas of a local table: a sparse_embedding (the servers'
        # own table) fails its init_params ("must be DenseTensor, ... holds SelectedRows").
        emb = paddle.static.nn.embedding(ids, size=[a.rows, a.dim], is_sparse=True)
    else:
        emb = paddle.static.nn.sparse_embedding(ids, size=[a.rows, a.dim])
    hidden = paddle.static.nn.fc(paddle.reshape(emb, [-1, a.dim]), 16, activation="relu")
    loss = paddle.mean(paddle.nn.functional.square_error_cost(
        paddle.static.nn.fc(hidden, 1), y))
    strategy = fleet.DistributedStrategy()
    strategy.a_sync = True
    if a.mode == "geo":
        strategy.a_sync_configs = {"k_steps": 5}
    fleet.distributed_optimizer(paddle.optimizer.SGD(0.01), strategy).minimize(loss)
    if fleet.is_server():
        fleet.init_server()
        fleet.run_server()
        return
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(paddle.static.default_startup_program())
    fleet.init_worker()
    index = fleet.worker_index()
    rng = np.random.RandomState(index)
    program = paddle.static.default_main_program()
    times = []
    waited = 0.0
    end = time.time() + a.seconds
    while time.time() < end:
        feed = {"ids": rng.randint(0, a.rows, (a.batch, 1)).astype("int64"),
                "y": rng.rand(a.batch, 1).astype("float32")}
        t0, c0 = time.perf_counter(), time.thread_time()
        exe.run(program, feed=feed, fetch_list=[loss])
        took = time.perf_counter() - t0
        times.append(took)
        # Off the CPU within the step: waiting on its pulls and pushes, or for a core.
        waited += max(0.0, took - (time.thread_time() - c0))
    ordered = sorted(times)
    _write(os.path.join(a.dir, "ps-trainer-%d.json" % index),
           {"role": "trainer", "index": index, "steps": len(times),
            "seconds": sum(times), "median_s": ordered[len(ordered) // 2] if times else None,
            "wait_s": waited, "host_ip": os.environ.get("POD_IP"),
            # Podman's and Docker's marks: the round ran in the job's container.
            "in_container": os.path.exists("/run/.containerenv")
            or os.path.exists("/.dockerenv")})
    fleet.barrier_worker()
    if fleet.is_first_worker():
        fleet.fleet._runtime_handle._worker.stop_server()
    fleet.stop_worker()


if __name__ == "__main__":
    main()
