"""Training scripts the cluster tests launch through the plan (real Paddle, CPU)."""

# Async PS as it works on Paddle 2.6.2 (CPU, protobuf < 5): the new launcher never
# stops the servers, so the trainers meet at a barrier and the first one stops them. A
# script puts its own lines before (what it records) and after (how it says it finished).
def ps_fleet(steps: str = "20", width: int = 4, batch: int = 8, hidden: int = 0,
             every: int = 0) -> str:
    """The async PS job: steps (a Python expression) of a batch of width features, through a
    hidden layer where given (larger pushes to the servers), a step line every `every` steps
    where given."""
    inner = f'h = paddle.static.nn.fc(x, {hidden}, activation="relu")\n' if hidden else ""
    out = "paddle.static.nn.fc(h, 1)" if hidden else "paddle.static.nn.fc(x, 1)"
    say = (f"        if step % {every} == 0:\n"
           '            print("step %d" % step, flush=True)\n') if every else ""
    return f"""\
import numpy as np
import paddle
import paddle.distributed.fleet as fleet
paddle.enable_static()
fleet.init()
x = paddle.static.data("x", [None, {width}], "float32")
y = paddle.static.data("y", [None, 1], "float32")
{inner}loss = paddle.mean(paddle.nn.functional.square_error_cost({out}, y))
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
    for step in range({steps}):
        xb = rng.rand({batch}, {width}).astype("float32")
        exe.run(paddle.static.default_main_program(),
                feed={{"x": xb, "y": xb.sum(1, keepdims=True)}}, fetch_list=[loss])
{say}    fleet.barrier_worker()
    if fleet.is_first_worker():
        fleet.fleet._runtime_handle._worker.stop_server()
    fleet.stop_worker()
"""


PS_FLEET = ps_fleet()

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

TRAIN_WATCH_PATH = "/root/train_watch.py"


def data_parallel(after_init: str = "", each_step: str = "") -> str:
    """Data-parallel training on CPU (gloo), a step line every 5 steps, for the steps given
    (the same count on every rank: they end together); after_init runs once the group is
    formed (`rank` is the global rank), each_step at the end of every step (indented 4)."""
    return f"""\
import os, subprocess, sys
import paddle
import paddle.distributed as dist
dist.init_parallel_env()
rank = dist.get_rank()
{after_init}paddle.seed(1)
net = paddle.nn.Sequential(paddle.nn.Linear(64, 2048), paddle.nn.ReLU(), paddle.nn.Linear(2048, 1))
model = paddle.DataParallel(net)
opt = paddle.optimizer.SGD(0.01, parameters=model.parameters())
for step in range(int(sys.argv[1])):
    x = paddle.randn([64, 64])
    loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
    loss.backward()
    opt.step()
    opt.clear_grad()
{each_step}    if step % 5 == 0:
        print("step %d loss %.4f" % (step, float(loss)), flush=True)
print("done", flush=True)
"""


TRAIN_WATCH = data_parallel()
TRAIN_SHAPES_PATH = "/root/train_shapes.py"
# TRAIN_WATCH in the shapes of real jobs, started with two ranks a host: global rank 5 sends
# its output to a log shipper through a pipe (no log file), rank 0 also computes the step's
# metrics on a held-out batch each step (busier than its peers by design: the job's shape)
# and evaluates every 20 steps (its peers wait for it at the next step).
TRAIN_SHAPES = data_parallel(
    after_init="""\
if rank == 5:  # its output to a log shipper through a pipe, as many job systems do
    shipper = subprocess.Popen(["sh", "-c", "cat > /dev/null"], stdin=subprocess.PIPE)
    os.dup2(shipper.stdin.fileno(), 1)
    os.dup2(shipper.stdin.fileno(), 2)
""",
    each_step="""\
    if rank == 0:  # rank 0's metrics, each step
        with paddle.no_grad():
            for _ in range(8):
                net(paddle.randn([1024, 64]))
    if rank == 0 and step % 20 == 0:  # rank 0 evaluates: its peers wait at the next step
        with paddle.no_grad():
            for _ in range(8):
                net(paddle.randn([1024, 64]))
""")

TRAIN_PS_WATCH_PATH = "/root/train_ps_watch.py"
# PS_FLEET's job for the steps given, a step line every 10 steps; its servers serve until
# the launch is stopped.
TRAIN_PS_WATCH = "import sys\n" + ps_fleet("int(sys.argv[1])", 64, 32, hidden=256, every=10)

TRAIN_RHYTHM_PATH = "/root/train_rhythm.py"
# A data-parallel job in a real job's rhythm, for the seconds given. Its arguments: run_s
# every_s phase_s shard_at shard_s, on rank 0's clock, which tells every rank in a flag
# all-reduced with each step. Every every_s rank 0 works alone for phase_s while its peers
# wait in the next step's all-reduce, by turns evaluating (computing) and saving a checkpoint
# (paddle.save, then the file compressed, written and fsynced); at shard_at every rank saves
# its shard of a sharded checkpoint for shard_s, in no collective. Paddle's gloo aborts a
# collective after 30 s: phase_s stays below it. A data loader's 0.2 s a step keeps the job
# light: its test runs beside the others.
TRAIN_RHYTHM = """\
import os, sys, time, zlib
import numpy as np
import paddle
import paddle.distributed as dist
dist.init_parallel_env()
rank = dist.get_rank()
run_s, every_s, phase_s, shard_at, shard_s = map(float, sys.argv[1:6])
paddle.seed(1)
net = paddle.nn.Sequential(paddle.nn.Linear(64, 1024), paddle.nn.ReLU(), paddle.nn.Linear(1024, 1))
model = paddle.DataParallel(net)
opt = paddle.optimizer.SGD(0.01, parameters=model.parameters())
os.makedirs("/root/ckpt", exist_ok=True)
BLOCK = np.random.RandomState(rank).randint(0, 16, 2 << 20).astype(np.uint8).tobytes()


def write_for(path, seconds, compress, pause):
    # Blocks (compressed: CPU work) written and fsynced for seconds: a save through the
    # storage layer; the file removed after, as a rotation would.
    end = time.monotonic() + seconds
    with open(path, "wb") as fh:
        while time.monotonic() < end:
            fh.write(zlib.compress(BLOCK, 6) if compress else BLOCK[:1 << 20])
            fh.flush()
            os.fsync(fh.fileno())
            time.sleep(pause)
    os.unlink(path)


start = time.monotonic()
next_phase, phases, sharded, step = start + every_s, 0, False, 0
while True:
    x = paddle.randn([256, 64])
    loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
    loss.backward()
    opt.step()
    opt.clear_grad()
    now = time.monotonic()
    told = paddle.to_tensor([float(rank == 0 and not sharded and now - start >= shard_at),
                             float(rank == 0 and now - start >= run_s)])
    dist.all_reduce(told)
    shard, stop = (float(v) > 0 for v in told.numpy())
    if step % 5 == 0:
        print("step %d loss %.4f" % (step, float(loss)), flush=True)
    step += 1
    if stop:
        break
    if shard:
        sharded = True
        print("saving sharded checkpoint ckpt/shard_%d" % rank, flush=True)
        write_for("/root/ckpt/shard_%d" % rank, shard_s, False, 0.25)
        next_phase = time.monotonic() + every_s
    elif rank == 0 and now >= next_phase and phases % 2:
        print("saving checkpoint to ckpt/step_%d.pdparams" % step, flush=True)
        paddle.save(net.state_dict(), "/root/ckpt/step.pdparams")
        write_for("/root/ckpt/step.pdparams.z", phase_s, True, 0.05)
    elif rank == 0 and now >= next_phase:
        print("evaluating on the held-out set", flush=True)
        end = time.monotonic() + phase_s
        with paddle.no_grad():
            while time.monotonic() < end:
                net(paddle.randn([4096, 64]))
                time.sleep(0.04)  # its data, read between batches
    if rank == 0 and now >= next_phase and not shard:
        phases += 1
        next_phase = time.monotonic() + every_s
    time.sleep(0.2)  # the data loader's
print("done", flush=True)
"""
