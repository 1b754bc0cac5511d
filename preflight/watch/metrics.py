"""The watch's figures as OpenMetrics, with prometheus_client: per rank (its pace, busy and
waiting cores, throttling, whether it is stopped), per host (load, the age of its last
sample), per GPU (utilisation, SM clock, temperature, power, whether a slowdown holds it) and
what each job's time went to (watch/timeshare.py: seconds by kind, since the watch first
judged it and over the last window) and the findings, served over HTTP (Prometheus scrapes
the controller) or written to node-exporter's textfile directory. Each scrape or write is a
snapshot of the last judgement: ranks that are gone leave no stale series behind."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from preflight.model.findings import Finding
from preflight.model.watch import GpuSample
from preflight.watch import timeshare
from preflight.watch.gpus import host_gpus, slowed_now
from preflight.watch.series import WatchState

RANK_LABELS = ["job", "host", "role", "rank"]
# A RankFigures field each, as preflight_watch_rank_<field>.
RANK_GAUGES = (
    ("progress_per_second", "steps (or step lines, or log bytes) a second"),
    ("busy_cores", "cores on a CPU or waiting for one"),
    ("cpu_wait_cores", "cores' worth of time runnable but waiting for a CPU"),
    ("throttled_ratio", "share of its cgroup's CFS periods throttled"),
    ("stopped", "1 when the rank is stopped (state T)"),
)
# (name, help, what of a GpuSample; None where it did not say), as preflight_watch_gpu_<name>.
GPU_GAUGES = (
    ("utilization_ratio", "share of the last period a kernel ran on the GPU",
     lambda g: None if g.util is None else g.util / 100),
    ("sm_clock_hertz", "the GPU's SM clock now",
     lambda g: None if g.sm_mhz is None else g.sm_mhz * 1e6),
    ("sm_clock_max_hertz", "the highest SM clock the GPU can run",
     lambda g: None if g.sm_max_mhz is None else g.sm_max_mhz * 1e6),
    ("temperature_celsius", "the GPU's temperature", lambda g: g.temp_c),
    ("power_watts", "the GPU's power draw", lambda g: g.power_w),
    ("slowed", "1 when a hardware slowdown, or a software cap while busy, holds its clock",
     lambda g: float(slowed_now(g))),
)


@dataclass(frozen=True)
class RankFigures:
    labels: tuple[str, str, str, str]
    progress_per_second: Optional[float]
    busy_cores: Optional[float]
    cpu_wait_cores: Optional[float]
    throttled_ratio: Optional[float]
    stopped: float  # 1.0 when stopped


def figures(state: WatchState, window_s: float) -> list[RankFigures]:
    """Each live rank's figures over the last window_s of its samples."""
    out = []
    for job in state.jobs.values():
        unit = job.unit()
        for r in job.live():
            if not r.samples:
                continue
            s = r.latest
            span = r.span(s.t - window_s, s.t, unit)
            ok = span is not None and span.dt > 0
            out.append(RankFigures(
                (job.key, r.rid.host, r.rid.role, "" if r.rid.rank is None else str(r.rid.rank)),
                span.progress / span.dt if ok and span and span.progress is not None else None,
                span.busy_s / span.dt if ok and span else None,
                span.wait_s / span.dt if ok and span else None,
                span.throttled / span.periods if ok and span and span.periods else None,
                1.0 if s.state in ("T", "t") else 0.0))
    return out


class _Snapshot:
    """A collector (prometheus_client's protocol: collect()) of the last judgement."""

    def __init__(self) -> None:
        self.ranks: list[RankFigures] = []
        self.hosts: list[tuple[str, Optional[float], float]] = []  # host, load1, age
        self.gpus: list[tuple[str, GpuSample]] = []
        self.findings: Sequence[Finding] = ()
        # job -> (seconds by kind since its first judgement, over the last window)
        self.times: dict[str, tuple[dict[str, float], dict[str, float]]] = {}

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        for name, doc in RANK_GAUGES:
            g = GaugeMetricFamily(f"preflight_watch_rank_{name}", doc, labels=RANK_LABELS)
            for rank in self.ranks:
                v = getattr(rank, name)
                if v is not None:
                    g.add_metric(list(rank.labels), v)
            yield g
        load = GaugeMetricFamily("preflight_watch_host_load1", "1-minute load average",
                                 labels=["host"])
        age = GaugeMetricFamily("preflight_watch_host_sample_age_seconds",
                                "seconds since the host's last sample", labels=["host"])
        for host, load1, seconds in self.hosts:
            if load1 is not None:
                load.add_metric([host], load1)
            age.add_metric([host], seconds)
        yield load
        yield age
        for name, doc, value in GPU_GAUGES:
            g = GaugeMetricFamily(f"preflight_watch_gpu_{name}", doc, labels=["host", "gpu"])
            for host, gpu in self.gpus:
                v = value(gpu)
                if v is not None:
                    g.add_metric([host, str(gpu.index)], v)
            yield g
        total = GaugeMetricFamily(
            "preflight_watch_job_time_seconds", "seconds of the job's time by what it went to "
            "(stepping, checkpoints, evaluations, phases, straggler, stalled, hung, stopped, "
            "suspended, starting, unjudged), since the watch first judged it",
            labels=["job", "kind"])
        window = GaugeMetricFamily(
            "preflight_watch_job_window_time_seconds", "the same over the last "
            f"{timeshare.WINDOW_S:g} s", labels=["job", "kind"])
        for job, (since, last) in sorted(self.times.items()):
            for kind in timeshare.KINDS:
                total.add_metric([job, kind], since.get(kind, 0.0))
                window.add_metric([job, kind], last.get(kind, 0.0))
        yield total
        yield window
        counts: dict[tuple[str, str, str], int] = {}
        for finding in self.findings:
            for h in finding.hosts:
                key = (finding.check, finding.status.value, h)
                counts[key] = counts.get(key, 0) + 1
        g = GaugeMetricFamily("preflight_watch_findings", "findings now, by check, status "
                              "and host", labels=["check", "status", "host"])
        for key, n in sorted(counts.items()):
            g.add_metric(list(key), n)
        yield g


class MetricsError(ValueError):
    """The endpoint could not listen (the port taken, the address not this host's), or
    prometheus_client is not installed."""


class Metrics:
    """A registry of the watch's own, updated after each judgement. prometheus_client is
    imported only here: a watch without metrics runs where it is not installed."""

    def __init__(self) -> None:
        try:
            from prometheus_client import CollectorRegistry
        except ImportError:
            raise MetricsError("--metrics-port and --metrics-textfile need prometheus_client "
                               "(pip install prometheus-client)") from None
        self.registry = CollectorRegistry(auto_describe=True)
        self.snapshot = _Snapshot()
        self.registry.register(self.snapshot)

    def update(self, state: WatchState, findings: Sequence[Finding], window_s: float,
               now: float) -> None:
        self.snapshot.ranks = figures(state, window_s)
        self.snapshot.hosts = [(h, s[-1].load1 if s else None,
                                now - state.last_tick.get(h, now))
                               for h, s in sorted(state.hosts.items())]
        self.snapshot.gpus = host_gpus(state)
        self.snapshot.findings = tuple(findings)
        self.snapshot.times = {
            key: (job.ledger.seconds(), job.ledger.seconds(now - timeshare.WINDOW_S))
            for key, job in state.jobs.items() if job.ledger.spells}

    def serve(self, address: str, port: int) -> Any:
        """Serves /metrics on address:port from a daemon thread; returns the server (its
        shutdown() stops it)."""
        from prometheus_client import start_http_server

        try:
            server, _ = start_http_server(port, addr=address, registry=self.registry)
        except OSError as e:
            raise MetricsError(f"--metrics-port: cannot listen on {address}:{port}: "
                               f"{e.strerror or e}") from None
        return server

    def write(self, path: str) -> None:
        """Writes the snapshot to path atomically (node-exporter's textfile collector)."""
        from prometheus_client import write_to_textfile

        write_to_textfile(path, self.registry)
