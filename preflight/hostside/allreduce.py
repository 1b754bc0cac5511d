"""All-reduce benchmark run on each host by Paddle's launcher (one process per device).

Shipped to the hosts by preflight: standard library and Paddle only. Each rank tells what it
has done as soon as it has done it, in the run directory (--dir), so that the controller can
tell a rank that never joined from one that stopped, a slow collective from a stalled one, and
keeps the sizes that finished when a run is cut short (network/progress.py reads them):

  progress.<local rank>  one JSON object a line: start (the script runs), init (Paddle is
                         imported: at the rendezvous), join (the rendezvous is done: rank,
                         world), op (collectives done so far), size (a size's median), done
  beat.<local rank>      the time, rewritten every second by a thread, and at the rendezvous
                         the rank's connected sockets. A rank blocked in a collective waiting
                         for a peer still beats (Paddle releases the GIL there, seen with gloo
                         on 2.6.2 and 3.3.1); a stopped or frozen one does not. The connected
                         sockets show the rendezvous at work: gloo opens a socket for every
                         peer at once, then connects them pair by pair, each rank waiting on
                         rank 0's store for its peers' addresses (seen with py-spy on 3.3.1),
                         so the count of open sockets stays flat while that of connected ones
                         grows.

Prints nothing besides Paddle's own noise; a failure is a traceback in the log."""

import argparse
import json
import os
import threading
import time

BEAT_S = 1.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1,8,32", help="message sizes in MiB")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--dir", required=True, help="where progress and heartbeats go")
    args = ap.parse_args()

    # The launcher names each local rank; the pid keeps two unnamed ones apart.
    local = os.environ.get("PADDLE_LOCAL_RANK") or str(os.getpid())
    log = open(os.path.join(args.dir, "progress." + local), "a")

    def event(kind, **fields):
        fields.update(e=kind, t=round(time.time(), 3))
        log.write(json.dumps(fields) + "\n")
        log.flush()  # the controller reads it while the run goes on

    event("start", pid=os.getpid())
    beat_path = os.path.join(args.dir, "beat." + local)

    stage = ["start"]  # the main thread's; the beat reads it

    def connected():
        """The rank's TCP sockets in state ESTABLISHED; -1 where /proc cannot tell."""
        try:
            mine = set()
            for fd in os.listdir("/proc/self/fd"):
                try:
                    link = os.readlink("/proc/self/fd/" + fd)
                except OSError:
                    continue  # closed meanwhile
                if link.startswith("socket:["):
                    mine.add(link[8:-1])
            n = 0
            for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
                try:
                    with open(table) as fh:
                        next(fh, None)  # the header
                        for line in fh:
                            f = line.split()
                            n += len(f) > 9 and f[3] == "01" and f[9] in mine
                except OSError:
                    continue  # no IPv6
            return n
        except OSError:
            return -1

    def beat():
        while True:
            # Only at the rendezvous: a host's TCP table may be long, and only there is the
            # count news.
            socks = " %d" % connected() if stage[0] == "init" else ""
            try:
                with open(beat_path + ".tmp", "w") as fh:
                    fh.write("%.3f%s" % (time.time(), socks))
                os.replace(beat_path + ".tmp", beat_path)
            except OSError:
                return  # the run directory is gone: the run is over
            time.sleep(BEAT_S)

    threading.Thread(target=beat, daemon=True, name="beat").start()

    import paddle
    import paddle.distributed as dist

    gpu = paddle.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0
    if gpu:
        paddle.set_device("gpu")  # the launcher's FLAGS_selected_gpus picks the device
    else:
        paddle.set_device("cpu")
    event("init")
    stage[0] = "init"
    dist.init_parallel_env()
    stage[0] = "joined"
    rank, world = dist.get_rank(), dist.get_world_size()
    event("join", rank=rank, world=world, backend="nccl" if gpu else "gloo")

    def sync():
        if gpu:
            paddle.device.cuda.synchronize()

    if world > 1:
        all_reduce, barrier = dist.all_reduce, dist.barrier
    else:
        # One rank: init_parallel_env made no group, and all_reduce would raise "The global
        # group is not initialized". Reducing with nobody is the identity; a copy on the
        # device stands for it, so the run still shows the device computes (busbw is 0).
        def all_reduce(t):
            t.copy_(t + 0, False)

        def barrier():
            pass

    ops = 0
    for mib in [float(s) for s in args.sizes.split(",")]:
        n = max(1, int(mib * (1 << 20)) // 4)
        t = paddle.ones([n], dtype="float32")
        all_reduce(t)  # warm-up: connections and buffers are set up here
        sync()
        ops += 1
        event("op", n=ops)
        times = []
        for _ in range(args.iters):
            barrier()
            sync()
            start = time.perf_counter()
            all_reduce(t)
            sync()
            times.append(time.perf_counter() - start)
            ops += 1
            event("op", n=ops)
        times.sort()
        event("size", bytes=n * 4, seconds=times[len(times) // 2])
    event("done")
    log.close()


if __name__ == "__main__":
    main()
