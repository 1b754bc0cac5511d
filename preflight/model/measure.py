"""What the active tests measured: iperf3 runs between hosts and the all-reduce (no judging)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, Optional, get_args

from preflight.model.policy import PsMode

Phase = Literal["survey", "retest"]  # a survey round's run, or a suspect's retest alone
SURVEY: Final = "survey"
RETEST: Final = "retest"
Backend = Literal["nccl", "gloo"]
Schedule = Literal["ring", "matrix"]  # which pairs iperf3 measures
# How an all-reduce ended (network/progress.py): "done"; "failed" (a rank exited with an
# error); "out-of-time" (the run's own allowance ran out, not the cluster's fault);
# "never-joined", "stalled" (named hosts kept the others waiting); "slow" (cut at the
# deadline while collectives still completed: sizes are what finished); "stall" (nothing
# completed and nobody to blame: the cluster's finding, not every host's).
RunOutcome = Literal["done", "failed", "out-of-time", "never-joined", "stalled", "slow",
                     "stall"]
PHASES: tuple[Phase, ...] = get_args(Phase)
BACKENDS: tuple[Backend, ...] = get_args(Backend)
SCHEDULES: tuple[Schedule, ...] = get_args(Schedule)
RUN_OUTCOMES: tuple[RunOutcome, ...] = get_args(RunOutcome)


@dataclass(frozen=True)
class IperfResult:
    """One iperf3 run from sender to receiver; error is set when there is no measurement."""

    sent_bps: Optional[float] = None
    received_bps: Optional[float] = None  # what arrived: the figure to judge a link by
    retransmits: Optional[int] = None
    seconds: Optional[float] = None
    sent_bytes: Optional[float] = None
    mss: Optional[int] = None  # TCP segment size: turns retransmits into a loss rate
    error: Optional[str] = None
    streams: int = 1  # parallel TCP streams (-P): one cannot fill a fast link on one core
    # Seconds measured first and left out (-O), as iperf3 reports them; None: not said.
    # Without them a short run's count holds TCP's slow start, not the link's loss.
    warmup_s: Optional[int] = None

    @property
    def loss_pct(self) -> Optional[float]:
        """Returns retransmitted segments as a percentage of the segments sent."""
        if self.retransmits is None or not self.sent_bytes or not self.mss:
            return None
        return 100.0 * self.retransmits * self.mss / self.sent_bytes


@dataclass(frozen=True)
class LinkRun:
    """One iperf3 run from sender to receiver: a survey round's, or a retest of a suspect."""

    sender: str
    receiver: str
    phase: Phase
    result: IperfResult

    @property
    def bps(self) -> Optional[float]:
        return self.result.received_bps


def ring_seconds(nbytes: float, ranks: int, link_bps: float) -> float:
    """Returns what one ring all-reduce of nbytes over ranks takes at least on a link of
    link_bps: every link carries 2(n-1)/n of the message (the busbw below, inverted)."""
    if ranks < 2 or link_bps <= 0:
        return 0.0
    return 2 * (ranks - 1) / ranks * nbytes * 8 / link_bps


@dataclass(frozen=True)
class SizeResult:
    """All-reduce of one message size: the median time of its iterations, and bandwidths."""

    nbytes: int
    seconds: float
    ranks: int

    @property
    def algbw(self) -> float:
        """Bytes per second of the message (nccl-tests' algbw)."""
        return self.nbytes / self.seconds if self.seconds > 0 else 0.0

    @property
    def busbw(self) -> float:
        """algbw * 2(n-1)/n: what each link carried in a ring all-reduce (nccl-tests)."""
        n = self.ranks
        return self.algbw * 2 * (n - 1) / n if n > 0 else 0.0


@dataclass(frozen=True)
class AllReduce:
    """One all-reduce run across hosts; failed maps a host to what its log said."""

    backend: Backend  # what the ranks ran
    hosts: tuple[str, ...]
    ranks: int
    sizes: tuple[SizeResult, ...] = ()
    error: Optional[str] = None
    failed: Mapping[str, str] = field(default_factory=dict)
    logs: Mapping[str, str] = field(default_factory=dict)  # hints from logs, even on success
    wall_s: float = 0.0
    # How it was sized (network/budget.py): the budget, the time predicted from the slowest
    # link, iterations per size, and the sizes left out to stay within the budget.
    budget_s: Optional[float] = None
    predicted_s: Optional[float] = None
    iters: int = 0
    dropped: tuple[str, ...] = ()
    outcome: RunOutcome = "done"
    launch_s: Optional[float] = None  # launchers started -> every rank joined
    progress: Mapping[str, str] = field(default_factory=dict)  # per host, what its ranks did
    cut: Optional[str] = None  # why a run that kept its partial sizes was cut short
    # What the facts called for (NCCL on GPU hosts): a GPU cluster whose ranks ran gloo had
    # Paddle see no GPU, and its figures say nothing of the GPUs' path.
    expected: Optional[str] = None

    @property
    def certified(self) -> bool:
        """Whether its figures are a whole run's (what a baseline may keep)."""
        return self.outcome == "done" and not self.error and bool(self.sizes)


# NIC error counters (/sys/class/net/IF/statistics) read around the active tests.
# A cable, transceiver or port going bad: frames arrive damaged or the carrier drops.
NIC_PHYSICAL = ("rx_crc_errors", "rx_frame_errors", "rx_length_errors", "rx_errors",
                "tx_errors", "tx_carrier_errors")
# The host could not keep up: the NIC's ring overflowed before the CPU emptied it.
NIC_OVERRUN = ("rx_missed_errors", "rx_fifo_errors", "rx_over_errors")
# Counted by many kernels for frames nobody asked for (LLDP, unknown protocols): context only.
NIC_DROPPED = ("rx_dropped", "tx_dropped")


@dataclass(frozen=True)
class NicCounters:
    """What a host's NIC error counters added while the active tests ran; only counters
    that grew."""

    interface: str
    grew: Mapping[str, int]

    def text(self, names: Sequence[str]) -> str:
        """Returns 'rx_crc_errors +12, ...' for the named counters that grew."""
        return ", ".join(f"{n} +{self.grew[n]}" for n in names if self.grew.get(n))


@dataclass(frozen=True)
class FanIn:
    """One parameter server's host receiving from every host of its trainers at once (an
    iperf3 client on each, to a server port of its own): the shape of PS traffic, many
    trainers pushing to one server, which pairwise tests never make."""

    receiver: str
    runs: Mapping[str, IperfResult] = field(default_factory=dict)  # by sending host
    attempts: int = 1  # a suspect fan-in is measured again; runs are its best attempt

    @property
    def total_bps(self) -> Optional[float]:
        """What arrived from all of them together; None when a run failed."""
        got = [r.received_bps for r in self.runs.values()]
        if not got or any(b is None for b in got):
            return None
        return float(sum(b for b in got if b is not None))

    @property
    def errors(self) -> dict[str, str]:
        return {h: r.error or "no figure" for h, r in self.runs.items()
                if r.error or r.received_bps is None}


# A PS job's all-reduce is not run: its traffic is pushes and pulls (the PS round measures it).
NOT_COLLECTIVE = "a PS job runs no collective (its PS round measures its path)"


@dataclass(frozen=True)
class PsTrainer:
    """One trainer of a PS round: the steps it made in its time, each a pull of its batch's
    embedding rows, the dense step, and its push."""

    host: str
    index: int
    steps: int
    seconds: float  # the steps' own time
    median_s: Optional[float] = None  # the median step
    # Of seconds, the time its stepping thread was off the CPU: waiting on its pulls and
    # pushes (the executor runs a step's ops on the caller's thread), or for a core.
    wait_s: Optional[float] = None
    in_container: Optional[bool] = None  # it trained in a container (Podman's or Docker's)

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    @property
    def wait_share(self) -> Optional[float]:
        return self.wait_s / self.seconds if self.wait_s is not None and self.seconds > 0 \
            else None


@dataclass(frozen=True)
class PsServer:
    """One server process of a PS round, from its own /proc while it served: its CPU time,
    its cgroup's throttling and the host's bytes in and out over that time."""

    host: str
    pid: int
    wall_s: float
    cpu_s: float
    throttled: Optional[int] = None  # periods its cgroup was throttled (None: unreadable)
    throttled_s: Optional[float] = None
    rx_bytes: Optional[int] = None
    tx_bytes: Optional[int] = None

    @property
    def cores(self) -> float:
        """The cores it kept busy, on average."""
        return self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0


@dataclass(frozen=True)
class PsRound:
    """A short real PS job on the plan's servers and trainers (network/ps_round.py)."""

    hosts: tuple[str, ...]
    mode: PsMode = "async"
    roles: Mapping[str, str] = field(default_factory=dict)  # host -> "server", "trainer"...
    trainers: tuple[PsTrainer, ...] = ()
    servers: tuple[PsServer, ...] = ()
    error: Optional[str] = None
    failed: Mapping[str, str] = field(default_factory=dict)  # host -> why, its log's words
    wall_s: float = 0.0
    seconds: float = 0.0  # what each trainer was given to train
    # host -> the address the job reaches it at: a peer's log names it by that alone.
    addresses: Mapping[str, str] = field(default_factory=dict)
    attempts: int = 1  # a round that hung everywhere with no cause said is run once more


@dataclass(frozen=True)
class PortReach:
    """A host's ports of the plan, each reached from the plan's other hosts
    (network/port_reach.py)."""

    host: str
    ports: tuple[int, ...]
    role: str = ""  # its part in the job (Plan.roles)
    # another host of the plan -> the ports it could not reach and why ("6070: timed out")
    unreached: Mapping[str, str] = field(default_factory=dict)
    error: Optional[str] = None  # why its ports could not be tested
    # another host -> its ports that timed out at first and answered on a retry ("6070")
    retried: Mapping[str, str] = field(default_factory=dict)
    # the hosts that tried its ports: the job's pairs (a PS trainer's ports none)
    reached_from: tuple[str, ...] = ()


@dataclass(frozen=True)
class NetworkTests:
    """Everything the active tests learned; skipped maps a host to why it took no part."""

    schedule: Schedule
    hosts: tuple[str, ...] = ()
    links: tuple[LinkRun, ...] = ()
    allreduce: Optional[AllReduce] = None
    allreduce_skipped: Optional[str] = None  # why no all-reduce ran at all
    skipped: Mapping[str, str] = field(default_factory=dict)
    interrupted: bool = False
    wall_s: float = 0.0
    rounds: int = 0  # iperf3 rounds of disjoint pairs run (survey and retests)
    # Hosts that are not ranks of the all-reduce because the plan leaves them out (a slow link,
    # another stack...): the all-reduce certifies the hosts the job would use.
    allreduce_left_out: Mapping[str, str] = field(default_factory=dict)
    # Each host's job interface: its negotiated speed (Mb/s, where the NIC reports one) and
    # what its error counters added over the iperf3 tests (absent: could not be read).
    nic_mbps: Mapping[str, int] = field(default_factory=dict)
    nic_counters: Mapping[str, NicCounters] = field(default_factory=dict)
    # PS jobs: each server host's fan-in from its trainers' hosts (network/fanin.py).
    fanin: tuple[FanIn, ...] = ()
    # Each plan host's ports reached from the plan's other hosts (network/port_reach.py).
    reach: tuple[PortReach, ...] = ()
    ps: Optional[PsRound] = None  # PS jobs: the round on the plan (network/ps_round.py)
    ps_skipped: Optional[str] = None  # why no PS round ran

    def line_bps(self) -> dict[str, float]:
        return {h: mbps * 1e6 for h, mbps in self.nic_mbps.items() if mbps > 0}

    def slowest_between(self, hosts: Sequence[str]) -> Optional[float]:
        """Returns the slowest link measured between two of hosts (survey and retests: a ring
        all-reduce crosses every such link); None when none was."""
        among = set(hosts)
        bps = [r.bps for r in self.links if r.bps is not None
               and r.sender in among and r.receiver in among]
        return min(bps) if bps else None
