"""Results logs as a run writes them, for the tests of runlog (in-process and local)."""

from __future__ import annotations

from facttools import probe_output

from preflight.collect.parse import parse_probe_output
from preflight.history import runlog
from preflight.model.host import Host, HostFailure, HostOutcome, Stage
from preflight.model.measure import IperfResult, LinkRun

HOSTS = [Host("a", "10.0.0.1", python="/opt/py/bin/python"), Host("b", "10.0.0.2"),
         Host("c", "10.0.0.3", roles=("worker",))]


def probe_text() -> str:
    """A probe's output captured on a simulated host (tests/fixtures/facts)."""
    return probe_output("paddle-3.3.1-cpu")


def answered(host: Host) -> HostOutcome:
    text = probe_text()
    return HostOutcome(host, facts=parse_probe_output(text, received_at=1000.0),
                       elapsed_s=0.4, received_at=1000.0, probe_output=text)


def write_partial(path: str) -> None:
    log = runlog.RunLog(path)
    log.start("check", ["check", "-i", "inv.yaml"], HOSTS, 999.0, "/x/inv.yaml")
    log.host(answered(HOSTS[0]))
    log.host(HostOutcome(HOSTS[1], failure=HostFailure(Stage.CONNECT, "connection refused")))
    log.link(LinkRun("a", "b", "survey", IperfResult(sent_bps=9e8, received_bps=8.9e8,
                                                     retransmits=0, seconds=1.0)))
    log.close()


