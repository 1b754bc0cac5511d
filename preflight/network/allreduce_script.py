"""All-reduce benchmark run on each host by Paddle's launcher (one process per device).

Shipped to the hosts by preflight: standard library and Paddle only. Rank 0's figures are
the cluster's (an all-reduce ends on every rank at once); each rank writes its own file.
Prints nothing on success besides Paddle's own noise; a failure is a traceback in the log."""

import argparse
import json
import os
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1,8,32", help="message sizes in MiB")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    import paddle
    import paddle.distributed as dist

    gpu = paddle.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0
    if gpu:
        paddle.set_device("gpu")  # the launcher's FLAGS_selected_gpus picks the device
    else:
        paddle.set_device("cpu")
    dist.init_parallel_env()
    rank, world = dist.get_rank(), dist.get_world_size()

    def sync():
        if gpu:
            paddle.device.cuda.synchronize()

    sizes = []
    for mib in [float(s) for s in args.sizes.split(",")]:
        n = max(1, int(mib * (1 << 20)) // 4)
        t = paddle.ones([n], dtype="float32")
        dist.all_reduce(t)  # warm-up: connections and buffers are set up here
        sync()
        times = []
        for _ in range(args.iters):
            dist.barrier()
            sync()
            start = time.perf_counter()
            dist.all_reduce(t)
            sync()
            times.append(time.perf_counter() - start)
        times.sort()
        sizes.append({"bytes": n * 4, "seconds": times[len(times) // 2]})
    doc = {"rank": rank, "world": world, "backend": "nccl" if gpu else "gloo",
           "sizes": sizes}
    out = "%s.%d" % (args.out, rank)
    with open(out + ".tmp", "w") as fh:
        json.dump(doc, fh)
    os.rename(out + ".tmp", out)


if __name__ == "__main__":
    main()
