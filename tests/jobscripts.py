"""Training scripts the cluster tests launch through the plan (real Paddle, CPU)."""

# Async PS as it works on Paddle 2.6.2 (CPU, protobuf < 5): the new launcher never
# stops the servers, so the trainers meet at a barrier and the first one stops them. A
# script puts its own lines before (what it records) and after (how it says it finished).
PS_FLEET = """\
import numpy as np
import paddle
import paddle.distributed.fleet as fleet
paddle.enable_static()
fleet.init()
x = paddle.static.data("x", [None, 4], "float32")
y = paddle.static.data("y", [None, 1], "float32")
loss = paddle.mean(paddle.nn.functional.square_error_cost(paddle.static.nn.fc(x, 1), y))
strategy = fleet.DistributedStrategy()
strategy.a_sync = True
fleet.distributed_optimizer(paddle.optimizer.SGD(0.01), strategy).minimize(loss)
if fleet.is_server():
    fleet.init_server()
    fleet.run_server()
else:
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(paddle.static.default_startup_program())
    fleet.init_worker()
    rng = np.random.RandomState(fleet.worker_index())
    for step in range(20):
        xb = rng.rand(8, 4).astype("float32")
        exe.run(paddle.static.default_main_program(), feed={"x": xb, "y": xb.sum(1, keepdims=True)},
                fetch_list=[loss])
    fleet.barrier_worker()
    if fleet.is_first_worker():
        fleet.fleet._runtime_handle._worker.stop_server()
    fleet.stop_worker()
"""

# A collective job on CPU: one gloo all-reduce over every rank, each rank leaving a marker.
TRAIN_GLOO = """\
import os, socket, sys
open("/root/ran-collective", "a").write(socket.gethostname() + "\\n")
import paddle
import paddle.distributed as dist
dist.init_parallel_env()
t = paddle.to_tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
n = dist.get_world_size()
total = float(t.numpy()[0])
assert total == n * (n + 1) / 2, total
open("/root/done-rank-%d" % dist.get_rank(), "w").write("%g of %d ranks\\n" % (total, n))
print("all_reduce sum", total, "ranks", n, flush=True)
"""
