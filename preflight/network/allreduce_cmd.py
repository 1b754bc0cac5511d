"""The commands an all-reduce runs on each host, as a Paddle job of network/paddle_job.py: its
launch (the benchmark, after a check that the master's port is free), the poll of its
progress and NCCL's hints on the network it chose."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from preflight.common import nccllog
from preflight.hostside import ship
from preflight.network import progress as P
from preflight.network.budget import LAUNCH_IDLE_S
from preflight.network.paddle_job import LOG, Member, in_running, launch_script, on_member

# What the host command prints besides its progress and its log's tail: NCCL's hints.
HINT = "PREFLIGHT-HINT "
# The master's port answered before its launcher started: what holds it, and the exit.
HELD, HELD_EXIT = "PREFLIGHT-HELD ", 97
HELD_WAIT_S = 5.0  # a holder on its way out (a stopped listener, a job just ended) may go
LOG_LINES = 40
DEFAULT_SIZES_MIB = (1.0, 8.0, 32.0)
NCCL_LARGE_MIB = nccllog.LARGE_MIB


@dataclass(frozen=True)
class AllReduceOptions:
    port: int = 36000  # the launcher's master; gloo gets port+1, the ranks port+2..port+2+nproc
    sizes_mib: tuple[float, ...] = DEFAULT_SIZES_MIB
    iters: int = 5
    timeout: float = 600.0  # launchers started -> results, at most (--allreduce-timeout)
    budget_s: float = 30.0  # what the collectives may take, predicted from the slowest link
    # From network/budget.py: the time the collectives get once every rank joined (None: up
    # to the timeout) and the predicted time of the largest single collective.
    collective_s: Optional[float] = None
    op_s: float = 0.0
    # Before every rank joined, the run is cut when nothing progressed for this long
    # (network/budget.py sizes it from the Paddle import the probe measured).
    launch_idle_s: float = LAUNCH_IDLE_S
    poll_s: float = 2.0  # how often the controller reads every host's progress


def host_command(m: Member, rank: int, members: Sequence[Member], opts: AllReduceOptions,
                 run_dir: str) -> str:
    """Returns the one command run on a host; every value is quoted."""
    q = shlex.quote
    master = f"{members[0].ip}:{opts.port}"
    env = ["NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,NET",  # which transport NCCL chose
           # With --master the launcher takes its rank ports (and rank 0's store) at random
           # from PORT_RANGE, not from --start_port: keep them in the range checked free.
           f"PORT_RANGE={opts.port + 2}:{opts.port + 2 + m.nproc}"]
    if m.gloo_ifname:
        env.append(f"GLOO_SOCKET_IFNAME={m.gloo_ifname}")
    launch = [m.python, "-m", "paddle.distributed.launch", "--master", master,
              "--nnodes", str(len(members)), "--rank", str(rank),
              "--nproc_per_node", str(m.nproc), "--host", m.ip, "--max_restart", "0",
              "--gloo_port", str(opts.port + 1),
              "--job_id", "preflight", "--log_dir", f"{run_dir}/log",
              f"{run_dir}/allreduce.py", "--sizes", ",".join(f"{s:g}" for s in opts.sizes_mib),
              "--iters", str(opts.iters), "--dir", run_dir]  # last: see stop_pattern
    after = [P.status_script(run_dir), hints_script(run_dir),
             f"if [ $rc -ne 0 ]; then tail -q -n {LOG_LINES} {q(run_dir)}/log/workerlog.0 "
             f"{q(run_dir)}/launch.log 2>/dev/null | sed 's/^/{LOG}/'; fi"]
    before: list[str] = []
    # Where the launcher runs in a container of its own, the host's network may not be
    # its: the master's port is checked only where the launcher shares it.
    if rank == 0 and (m.container is None or in_running(m)):
        # hostside's master_free: Paddle's launcher takes anything listening on its master's
        # port for its master; what holds it is named and the launch not started. Only its
        # verdict stops the launch: a check that could not run (no /proc) does not.
        free = ship.inline(m.python, "master_free", members[0].ip, str(opts.port),
                           f"{HELD_WAIT_S:g}", str(HELD_EXIT), HELD)
        before.append(f"{shlex.join(free)}; "
                      f"[ $? -ne {HELD_EXIT} ] || exit {HELD_EXIT}")
    return launch_script(m, run_dir, ["env", *env, *launch],
                         ("allreduce", "allreduce.py"), opts.timeout, after, before)


def hints_script(run_dir: str) -> str:
    """Prints NCCL's lines on the network it chose, once each whatever the number of ranks
    (the "host:pid:tid [rank] NCCL INFO " prefix dropped), as hints."""
    lines = f"sed -n 's/^.*NCCL INFO //p' {shlex.quote(run_dir)}/log/workerlog.* 2>/dev/null"
    # The choice first, so that a long list of plugin attempts cannot push it out.
    return (f"{{ {lines} | grep -E {shlex.quote(nccllog.CHOSEN)} | sort -u | head -n 2; "
            f"{lines} | grep -E {shlex.quote(nccllog.TRIED)} | awk '!seen[$0]++' "
            f"| head -n 6; }} | sed 's/^/{HINT}/'")


def status_command(m: Member, run_dir: str) -> str:
    return on_member(m, P.status_script(run_dir))
