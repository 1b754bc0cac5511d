"""Configuration checks on facts: env, files, MTU, clock, shm, nofile, ports."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support import cluster, same

from preflight import facts as F
from preflight.checks import clock, env, files, limits, network, ports
from preflight.model import Cluster, Status
from preflight.policy import Policy


def msgs(findings, status):
    return [f.message for f in findings if f.status is status]


def with_policy(c: Cluster, **kw) -> Cluster:
    return replace(c, policy=replace(Policy(), **kw))


def envf(**kv: str) -> F.EnvFacts:
    return F.EnvFacts(tuple(sorted(kv.items())))


def net(mtu: int = 1500, address: str = "10.0.0.1", name: str = "eth0", ib=()) -> F.NetworkFacts:
    return F.NetworkFacts((F.Interface(name, mtu, "up", None, (f"{address}/24",)),
                           F.Interface("lo", 65536, "unknown", None, ("127.0.0.1/8",))),
                          default_route=name, infiniband=tuple(ib))


# ---------------------------------------------------------------- env
ENV_CASES = [
    ("alike", same(3, env=envf(NCCL_SOCKET_IFNAME="eth0")), [], []),
    ("drift-nccl-fails", {**same(2, env=envf(NCCL_ALGO="Ring")), "n3": {"env": envf()}},
     ["n3: NCCL_ALGO unset != Ring (2 of 3 hosts)"], []),
    ("drift-glog-warns", {**same(2, env=envf(GLOG_v="0")), "n3": {"env": envf(GLOG_v="3")}},
     [], ["n3: GLOG_v 3 != 0 (2 of 3 hosts)"]),
    ("nccl-debug-info", same(2, env=envf(NCCL_DEBUG="INFO")), [],
     ["node01: NCCL_DEBUG=INFO slows NCCL calls and floods the logs: use WARN outside "
      "debugging", "node02: NCCL_DEBUG=INFO slows NCCL calls and floods the logs: use WARN "
      "outside debugging"]),
    ("ib-disabled-with-ib",
     {"a": {"env": envf(NCCL_IB_DISABLE="1"), "network": net(ib=["mlx5_0"])}},
     ["a: NCCL_IB_DISABLE=1 on a host with InfiniBand (mlx5_0): NCCL falls back to TCP sockets"],
     []),
    ("ib-disabled-without-ib", {"a": {"env": envf(NCCL_IB_DISABLE="1")}}, [], []),
    ("ifname-missing", {"a": {"env": envf(NCCL_SOCKET_IFNAME="ib0")}},
     ["a: NCCL_SOCKET_IFNAME=ib0 matches none of the host's interfaces (eth0): NCCL cannot "
      "bootstrap"], []),
    ("ifname-exclude-all", {"a": {"env": envf(NCCL_SOCKET_IFNAME="^eth,lo")}},
     ["a: NCCL_SOCKET_IFNAME=^eth,lo matches none of the host's interfaces (eth0): NCCL cannot "
      "bootstrap"], []),
    ("ifname-list", {"a": {"env": envf(NCCL_SOCKET_IFNAME="ib,eth")}}, [], []),
    ("ifname-exclusion-ok", {"a": {"env": envf(NCCL_SOCKET_IFNAME="^docker,lo")}}, [], []),
    ("ifname-exact", {"a": {"env": envf(NCCL_SOCKET_IFNAME="=eth")}},
     ["a: NCCL_SOCKET_IFNAME==eth matches none of the host's interfaces (eth0): NCCL "
      "cannot bootstrap"], []),
    ("ifname-exact-ok", {"a": {"env": envf(NCCL_SOCKET_IFNAME="=eth0")}}, [], []),
    ("gloo-ifname-missing", {"a": {"env": envf(GLOO_SOCKET_IFNAME="eth")}},
     ["a: GLOO_SOCKET_IFNAME=eth is none of the host's interfaces (eth0): gloo (CPU "
      "collectives) cannot start"], []),
    ("gloo-ifname-ok", {"a": {"env": envf(GLOO_SOCKET_IFNAME="eth0")}}, [], []),
]


@pytest.mark.parametrize("hosts,fails,warns", [c[1:] for c in ENV_CASES],
                         ids=[c[0] for c in ENV_CASES])
def test_env(hosts, fails, warns):
    fs = list(env.check(cluster(**hosts)))
    assert msgs(fs, Status.FAIL) == fails
    assert msgs(fs, Status.WARN) == warns


def test_env_section_error():
    fs = list(env.check(cluster(a={}, b={"env": F.SectionError("KeyError")})))
    assert msgs(fs, Status.COULD_NOT_CHECK) == ["b: could not read environment: KeyError"]


# ---------------------------------------------------------------- files
def ff(**paths) -> F.FilesFacts:
    return F.FilesFacts(tuple(F.FileFact(p, **v) for p, v in paths.items()))


def test_files_alike_differ_missing():
    good = ff(**{"/job/train.py": {"sha256": "a" * 64, "size": 10}})
    odd = ff(**{"/job/train.py": {"sha256": "b" * 64, "size": 10}})
    gone = ff(**{"/job/train.py": {"error": "FileNotFoundError: No such file or directory"}})
    c = with_policy(cluster(n1={"files": good}, n2={"files": good}, n3={"files": odd},
                            n4={"files": gone}, n5={"files": F.SectionError("boom")}),
                    files=("/job/train.py",))
    fs = list(files.check(c))
    assert msgs(fs, Status.FAIL) == [
        "n4: /job/train.py: FileNotFoundError: No such file or directory",
        "n3: /job/train.py sha256 bbbbbbbbbbbb != aaaaaaaaaaaa (2 of 3 hosts)"]
    assert msgs(fs, Status.COULD_NOT_CHECK) == ["n5: could not read file hashes: boom"]
    assert [f.hosts for f in fs if f.status is Status.PASS] == [("n1", "n2")]


def test_files_not_asked_for_means_no_findings():
    assert list(files.check(cluster(**same(2)))) == []


# ---------------------------------------------------------------- MTU
def test_mtu():
    c = cluster(a={"network": net(1500, "10.0.0.1")}, b={"network": net(1500, "10.0.0.2")},
                c={"network": net(9000, "10.0.0.3")})
    c = replace(c, outcomes=tuple(replace(o, host=replace(o.host, address=f"10.0.0.{i}"))
                                  for i, o in enumerate(c.outcomes, 1)))
    fs = list(network.check(c))
    assert msgs(fs, Status.FAIL) == ["c: MTU 9000 != 1500 (2 of 3 hosts) on c:eth0"]
    assert [f.hosts for f in fs if f.status is Status.PASS] == [("a", "b")]


def test_mtu_uses_default_route_when_address_is_a_name():
    no_route = F.NetworkFacts((F.Interface("lo", 65536, None, None, ()),))
    fs = list(network.check(cluster(a={}, b={"network": no_route})))
    assert msgs(fs, Status.COULD_NOT_CHECK)[0].startswith("b: no interface holds")
    assert any(f.status is Status.PASS and f.hosts == ("a",) for f in fs)


# ---------------------------------------------------------------- clock
@pytest.mark.parametrize("skew,status", [(0.3, None), (2.0, Status.WARN), (30.0, Status.FAIL),
                                         (-30.0, Status.FAIL)])
def test_clock(skew, status):
    hosts = {f"n{i}": {"clock": F.ClockFacts(0.0, 0.01 * i)} for i in range(4)}
    hosts["odd"] = {"clock": F.ClockFacts(0.0, skew)}
    fs = list(clock.check(cluster(**hosts)))
    bad = [f for f in fs if f.status is not Status.PASS]
    if status is None:
        assert bad == []
    else:
        assert [(f.status, f.hosts) for f in bad] == [(status, ("odd",))]
        word = "ahead of" if skew > 0 else "behind"
        assert f"odd: clock {abs(skew) - 0.02:.1f} s {word} the cluster median" in bad[0].message


def test_clock_unreported():
    fs = list(clock.check(cluster(a={}, b={"clock": F.SectionError("missing")})))
    assert msgs(fs, Status.COULD_NOT_CHECK) == ["b: could not read the clock: missing"]


# ---------------------------------------------------------------- shm, nofile
MIB = 1 << 20


@pytest.mark.parametrize("mib,status", [(64, Status.FAIL), (768, Status.WARN), (8192, None)])
def test_shm(mib, status):
    fs = list(limits.check_shm(cluster(a={"shm": F.ShmFacts(mib * MIB, mib * MIB)})))
    assert [f.status for f in fs if f.status is not Status.PASS] == ([status] if status else [])
    if status:
        assert fs[0].message.startswith(f"a: /dev/shm is {mib} MiB")


@pytest.mark.parametrize("free_mib,status", [(0, Status.FAIL), (63, Status.FAIL),
                                             (512, Status.WARN), (4096, None)])
def test_tmp_free_space(free_mib, status):
    tmp = F.TmpFacts("/tmp", 8192 * MIB, free_mib * MIB)
    fs = list(limits.check_tmp(cluster(a={"tmp": tmp}, b={})))
    bad = [f for f in fs if f.status is not Status.PASS]
    assert [(f.status, f.hosts) for f in bad] == ([(status, ("a",))] if status else [])
    if status:
        assert bad[0].message.startswith(f"a: /tmp has {free_mib} MiB free")


def test_tmp_not_reported_cannot_pass():
    fs = list(limits.check_tmp(cluster(a={"tmp": None}, b={})))
    assert [(f.status, f.hosts) for f in fs] == [(Status.COULD_NOT_CHECK, ("a",)),
                                                 (Status.PASS, ("b",))]


@pytest.mark.parametrize("soft,status", [(1024, Status.FAIL), (8192, Status.WARN),
                                         (65536, None), (None, None)])
def test_nofile(soft, status):
    lim = F.LimitsFacts(F.Limit(soft, soft), F.Limit(None, None))
    fs = list(limits.check_nofile(cluster(a={"limits": lim})))
    assert [f.status for f in fs if f.status is not Status.PASS] == ([status] if status else [])


def test_limits_unreported():
    c = cluster(a={"shm": F.SectionError("x"), "limits": F.SectionError("y")})
    assert msgs(limits.check_shm(c), Status.COULD_NOT_CHECK) == ["a: could not read /dev/shm: x"]
    assert msgs(limits.check_nofile(c), Status.COULD_NOT_CHECK) == ["a: could not read limits: y"]


# ---------------------------------------------------------------- ports
def test_ports_named_by_the_policy_must_be_free():
    c = cluster(a={"ports": F.PortsFacts((22, 6070, 6071))}, b={"ports": F.PortsFacts((22,))},
                c={"ports": F.SectionError("no /proc/net/tcp")})
    c = replace(c, policy=Policy(ports=(*range(6070, 6078), 6767)))
    fs = list(ports.check(c))
    assert msgs(fs, Status.FAIL) == [
        "a: port 6070-6071 already in use (the launcher needs 6070-6077, 6767): stop the old "
        "job or choose other ports"]
    assert msgs(fs, Status.COULD_NOT_CHECK) == [
        "c: could not read listening ports: no /proc/net/tcp"]
    assert [f.hosts for f in fs if f.status is Status.PASS] == [("b",)]
    assert ports.ranges((1, 2, 3, 5, 7, 8)) == "1-3, 5, 7-8"


def test_paddle_default_ports_taken_only_warn():
    # Without ports in the policy the plan picks free ones; a launch by hand would clash.
    c = cluster(a={"ports": F.PortsFacts((22, 6767))}, b={"ports": F.PortsFacts((22,))})
    fs = list(ports.check(c))
    assert msgs(fs, Status.FAIL) == []
    assert msgs(fs, Status.WARN) == [
        "a: port 6767 already in use: a launch with Paddle's default ports (6070-6077, 6767) "
        "would clash; the plan's ports are free"]
