"""Verdict rules and the handling of a crashing check."""

from __future__ import annotations

from support import REFUSED, cluster, paddle, same

from preflight.checks import ALL_CHECKS, CheckSpec
from preflight.judge import judge, run_checks
from preflight.model.cluster import Cluster
from preflight.model.findings import Finding, Status, Verdict


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


def test_checks_with_nothing_to_judge_are_named_with_when_they_apply():
    from support import report_doc

    from preflight.report import markdown, terminal
    from preflight.report.jsonreport import typed
    c = cluster(**same(3))  # no network tests, no container, no PS job, no pins
    findings = run_checks(c)
    j = judge(c, findings, waived=("files",))
    said = {f.check for f in findings}
    idle = dict(j.not_applicable)
    # Exactly the checks that ran and said nothing; a waived one is said as waived instead.
    assert set(idle) == {s.name for s in ALL_CHECKS} - said - {"files"}
    assert {"bandwidth", "allreduce", "container", "ps-round", "baseline"} <= set(idle)
    assert idle["bandwidth"] == "iperf3 runs between two hosts or more (not --no-network-tests)"
    report = typed(report_doc(c, j, started_at=1.0))
    assert report.not_applicable == idle
    text = terminal.render(report, width=0)
    line = next(ln for ln in text.splitlines() if ln.startswith("N/A "))
    assert line.endswith(": " + ", ".join(idle)), line
    detail = terminal.render(report, width=0, detail=True)
    assert "  n/a  ps-round  applies when a PS job (--mode ps) is checked" in detail
    assert "nothing to judge in this run: " in markdown.render(report)


def starved_and_slow(rate: float):
    """node03 under a quarter-core quota, its links at rate (confirmed by a retest)."""
    from dataclasses import replace

    from support import G, cpu, link, net_tests, slow_host, survey

    from preflight.model import facts as F
    from preflight.model.measure import RETEST
    nodes = ["node01", "node02", "node03", "node04"]
    links = survey(nodes, slow_host("node03", rate=rate * G, fast=0.95 * G)) + [
        link("node03", "node01", rate * G, RETEST), link("node01", "node03", rate * G, RETEST)]
    hosts = same(4, cpu=cpu(effective=2.0, logical=2))
    hosts["node03"] = {"cpu": cpu(effective=0.25, logical=2,
                                  quota=F.CpuQuota(1, 25000, 100000, 0.25))}
    return replace(cluster(**hosts), network=net_tests(links))


def test_a_symptom_its_cause_explains_is_folded_into_the_causes_finding():
    # The quota is the cause, the slow links its symptom: one finding, cpu-cores', with the
    # links as its evidence; however slow the links were measured, the same status.
    statuses = set()
    for rate in (0.6, 0.3):  # a warn's worth and a fail's worth of slowness
        found = run_checks(starved_and_slow(rate))
        bad = [f for f in found if f.status is not Status.PASS and "node03" in f.hosts
               and f.check in ("cpu-cores", "bandwidth")]
        assert [f.check for f in bad] == ["cpu-cores"], [(f.check, f.message) for f in bad]
        [cause] = bad
        assert cause.message.startswith("node03: 0.25 effective cores (cgroup v1 quota "
                                        "25000/100000 us)")
        assert "; it explains what bandwidth saw: its links are slow: sends at most" in \
            cause.message
        [evidence] = cause.data["evidence"]
        assert evidence["check"] == "bandwidth" and evidence["hosts"] == ["node03"]
        assert evidence["message"].startswith("node03: slow host, explained by its CPU")
        statuses.add(cause.status)
    assert statuses == {Status.FAIL}


def test_a_symptom_stands_alone_when_its_cause_is_waived():
    c = starved_and_slow(0.3)
    specs = [s for s in ALL_CHECKS if s.name != "cpu-cores"]
    bad = [f for f in run_checks(c, specs) if f.status is not Status.PASS
           and f.check == "bandwidth"]
    assert [f.hosts for f in bad] == [("node03",)]


def test_several_symptoms_of_one_cause_are_said_once_and_all_kept_as_evidence():
    from preflight.judge import fold_explained
    cause = Finding("cpu-cores", Status.FAIL, ("n3",), "n3: 0.25 effective cores")
    symptoms = [Finding("bandwidth", Status.WARN, ("n3", peer), f"n3 -> {peer}: loss",
                        {"explained_by": {"check": "cpu-cores", "host": "n3",
                                          "evidence": f"n3 -> {peer} loses"}})
                for peer in ("n1", "n2")]
    [f] = fold_explained([cause, *symptoms])
    assert f.message == "n3: 0.25 effective cores; it explains what bandwidth saw: n3 -> n1 loses"
    assert [e["message"] for e in f.data["evidence"]] == ["n3 -> n1: loss", "n3 -> n2: loss"]


def test_an_explanation_without_a_check_and_a_host_explains_nothing():
    # A report edited by hand, or written by another tool: what it says of its cause is read
    # as a type, and a cause it does not name folds nothing away.
    from preflight.judge import fold_explained
    from preflight.model.findings import EXPLAINED_BY, Explanation
    cause = Finding("cpu-cores", Status.FAIL, ("n3",), "n3: 0.25 effective cores")
    typed = Explanation("cpu-cores", "n3", "n3 -> n1 loses")
    assert Explanation.of({EXPLAINED_BY: typed.as_data()}) == typed
    for by in ({"check": "cpu-cores"}, {"host": "n3", "evidence": "x"}, "cpu-cores on n3",
               {"check": "cpu-cores", "host": 3}, {"check": "", "host": "n3"}):
        symptom = Finding("bandwidth", Status.WARN, ("n3", "n1"), "n3 -> n1: loss",
                          {EXPLAINED_BY: by})
        assert Explanation.of(symptom.data) is None, by
        assert fold_explained([cause, symptom]) == [cause, symptom], by
