"""Verdict rules and the handling of a crashing check."""

from __future__ import annotations

from support import REFUSED, cluster, paddle, same

from preflight.checks import ALL_CHECKS, CheckSpec
from preflight.judge import judge, run_checks
from preflight.model.cluster import Cluster
from preflight.model.findings import Status, Verdict


def verdict(c: Cluster) -> Verdict:
    return judge(c, run_checks(c)).verdict


def test_go_only_when_nothing_blocks():
    assert verdict(cluster(**same(3))) is Verdict.GO
    assert verdict(cluster(**same(2), node03={"paddle": paddle("2.6.2")})) is Verdict.NO_GO
    assert verdict(cluster(**same(2), node03=REFUSED)) is Verdict.NO_GO


def test_every_host_failing_is_no_go_with_reasons():
    j = judge(c := cluster(a=REFUSED, b=REFUSED), run_checks(c))
    assert j.verdict is Verdict.NO_GO
    # One fault on both hosts is one reason naming both.
    assert j.reasons == ("a,b: could not check (connect): connection refused at 10.0.0.9:22 "
                         "(is sshd running?)",), j.reasons


def test_no_hosts_is_no_go():
    assert verdict(Cluster(())) is Verdict.NO_GO


def test_crashing_check_is_an_error_finding_and_others_still_run():
    def boom(c: Cluster):
        raise KeyError("gpu")
    specs = (CheckSpec("boom", boom, "crashes"), *ALL_CHECKS)
    c = cluster(**same(2))
    findings = run_checks(c, specs)
    err = [f for f in findings if f.status is Status.ERROR]
    assert len(err) == 1 and err[0].check == "boom"
    assert "check boom crashed: KeyError: 'gpu'" in err[0].message
    assert any(f.check == "paddle-stack" and f.status is Status.PASS for f in findings)
    j = judge(c, findings)
    assert j.verdict is Verdict.NO_GO and j.crashed_checks


def test_a_comparing_check_on_one_host_is_n_a_and_what_it_found_wrong_stands():
    one = cluster(node01={})
    found = run_checks(one)
    na = {f.check for f in found if f.status is Status.SKIP}
    assert {"gpu-homogeneous", "cpu-cores", "mtu", "clock", "nic-speed"} <= na
    assert not {f.check for f in found if f.status is Status.PASS} & na  # no "pass" beside
    assert [f.message for f in found if f.check == "mtu"] == ["node01: n/a on one host "
                                                              "(compares hosts)"]
    assert judge(one, found).verdict is Verdict.GO
    # What a comparing check could not tell on one host (which interface the job uses) is
    # moot too; on two hosts it is a finding.
    from preflight.model import facts as F
    lone = cluster(node01={"network": F.NetworkFacts(())})
    assert [f.status for f in run_checks(lone) if f.check == "mtu"] == [Status.SKIP]
    pair = cluster(**same(2, network=F.NetworkFacts(())))
    assert {f.status for f in run_checks(pair) if f.check == "mtu"} == {Status.COULD_NOT_CHECK}
    # On two hosts the same checks compare, and pass.
    two = run_checks(cluster(**same(2)))
    assert not [f for f in two if f.status is Status.SKIP]


def test_paddle_not_requested_blocks_nothing():
    from preflight.model import facts as F
    c = cluster(**same(2, paddle=F.SectionError(F.PADDLE_NOT_REQUESTED)))
    found = run_checks(c)
    assert [(f.check, f.status) for f in found if f.check == "paddle-stack"] == \
        [("paddle-stack", Status.SKIP)] * 2
    j = judge(c, found)
    assert j.verdict is Verdict.GO, j.reasons
    # Paddle that could not be read for another reason still blocks.
    broken = cluster(**same(2, paddle=F.SectionError("probe timed out")))
    assert judge(broken, run_checks(broken)).verdict is Verdict.NO_GO
