"""The live progress bar: drawn on a terminal only, bounded to its width, fed by the long
phases (probing hosts, iperf3 rounds, the all-reduce)."""

from __future__ import annotations

import io

from support import G, cluster, outcome, same

from preflight.model import facts as F
from preflight.model.host import HostOutcome
from preflight.model.measure import IperfResult, LinkRun
from preflight.network import nic, orchestrate
from preflight.network import progress as P
from preflight.network.allreduce_watch import progress_of
from preflight.network.orchestrate import NetworkOptions, run_link_tests
from preflight.report.terminal import Progress, bar
from preflight.transport.local.run import LocalRemote


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_bar_shows_the_count_and_fits_the_width():
    line = bar("iperf3 ring, 4 rounds over 8 hosts: links", 8, 16, 4.2, 80)
    assert line == "iperf3 ring, 4 rounds over 8 hosts: links [##########----------] 8/16  4 s"
    assert len(bar("x" * 300, 1, 3, 0, 60)) <= 60
    assert bar("waiting", 0, 0, 1, 80) == "waiting  1 s"  # no count: no bar


def test_progress_draws_on_a_terminal_in_place_and_nothing_elsewhere(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("TERM", "xterm")
    tty = Tty()
    p = Progress(tty)
    p(outcome("a"), 1, 4)
    p(HostOutcome(outcome("b").host, failure=None, facts=None), 2, 4)
    p.step("all-reduce (gloo) over 4 hosts: hosts joined", 3, 4)
    p.close()
    drawn = tty.getvalue().split("\r\033[K")
    assert drawn[1].startswith("probing hosts [#####---------------] 1/4")
    assert drawn[2].startswith("probing hosts (1 could not be checked) [##########")
    assert drawn[3].startswith("all-reduce (gloo) over 4 hosts: hosts joined [###############")
    assert drawn[-1] == ""  # the line is cleared for the report
    pipe = io.StringIO()
    Progress(pipe).step("iperf3", 1, 2)
    assert pipe.getvalue() == ""
    monkeypatch.setenv("TERM", "dumb")
    dumb = Tty()
    Progress(dumb).step("iperf3", 1, 2)
    assert dumb.getvalue() == ""


def test_iperf3_rounds_feed_the_bar_up_to_every_link(monkeypatch):
    c = cluster(**same(4, gpu=F.GpuFacts("none")))
    remotes = {o.host.name: LocalRemote(o.host.name) for o in c.outcomes}

    def rounds(rnds, remotes, addresses, opts, phase, servers, on_run=None, nic_mbps=None):
        for rnd in rnds:
            for s, r in rnd:
                on_run(LinkRun(s, r, phase, IperfResult(received_bps=G)))
        return []

    monkeypatch.setattr(orchestrate, "run_rounds", rounds)
    monkeypatch.setattr(orchestrate, "_has_iperf3", lambda remotes: {})
    monkeypatch.setattr(nic, "read_all", lambda remotes, tested: {})
    seen: list[tuple[str, int, int]] = []
    net = run_link_tests(c.outcomes, remotes, c.policy.limits,
                         NetworkOptions(run_allreduce=False),
                         on_step=lambda text, done, total: seen.append((text, done, total)))
    total = len(net.links)
    assert seen[0] == ("iperf3 ring, 4 rounds over 4 hosts: links", 0, total)
    assert [d for _, d, _ in seen] == list(range(total + 1))  # every link, in order
    assert {t for _, _, t in seen} == {total}


def _host(ranks: int, joined: bool, sizes: int) -> P.HostProgress:
    return P.HostProgress(100.0, True, tuple(
        P.RankProgress(str(i), started=1.0, init=2.0, joined=3.0 if joined else None,
                       sizes=tuple((1 << 20, 0.1) for _ in range(sizes)))
        for i in range(ranks)))


def test_the_all_reduce_counts_hosts_joined_then_sizes_every_rank_finished():
    nproc = {"a": 2, "b": 2, "c": 2}
    assert progress_of({"a": _host(2, True, 0), "b": _host(1, False, 0), "c": None},
                       nproc, 3) == ("hosts joined", 1, 3)
    assert progress_of({"a": _host(2, True, 2), "b": _host(2, True, 1),
                        "c": _host(2, True, 3)}, nproc, 3) == ("message sizes done", 1, 3)
