"""The env check: training variables alike, none set to a hurtful value."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support import cluster, messages, net_facts, same

from preflight.checks import env
from preflight.model import facts as F
from preflight.model.findings import Status


def envf(**kv: str) -> F.EnvFacts:
    return F.EnvFacts(tuple(sorted(kv.items())))


def down(name: str) -> F.NetworkFacts:
    """A host whose NIC `name` holds its address but is down."""
    net = net_facts(name=name)
    return replace(net, interfaces=tuple(replace(i, state="down") if i.name == name else i
                                         for i in net.interfaces))


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
     {"a": {"env": envf(NCCL_IB_DISABLE="1"), "network": net_facts(ib=["mlx5_0"])}},
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
    # Per-host values differ where NICs are named differently: each resolves on its host.
    ("per-host-names-differ", {
        "a": {"env": envf(NCCL_SOCKET_IFNAME="eth0", GLOO_SOCKET_IFNAME="eth0",
                          NCCL_IB_HCA="mlx5_0"), "network": net_facts(ib=["mlx5_0"])},
        "b": {"env": envf(NCCL_SOCKET_IFNAME="ens5", GLOO_SOCKET_IFNAME="ens5",
                          NCCL_IB_HCA="mlx5_2:1"),
              "network": net_facts(name="ens5", ib=["mlx5_2", "mlx5_3"])},
        "c": {"env": envf(NCCL_SOCKET_IFNAME="eth0", GLOO_SOCKET_IFNAME="eth0",
                          NCCL_IB_HCA="mlx5_0"), "network": net_facts(ib=["mlx5_0"])}}, [], []),
    ("ifname-down", {"a": {"env": envf(NCCL_SOCKET_IFNAME="eth0"), "network": down("eth0")}},
     ["a: NCCL_SOCKET_IFNAME=eth0 selects only interfaces that are down (eth0 down): NCCL "
      "cannot bootstrap"], []),
    ("gloo-ifname-down", {"a": {"env": envf(GLOO_SOCKET_IFNAME="eth0"), "network": down("eth0")}},
     ["a: GLOO_SOCKET_IFNAME=eth0 selects only interfaces that are down (eth0 down): gloo "
      "(CPU collectives) cannot start"], []),
    ("ib-hca-exclusion-of-all", {"a": {"env": envf(NCCL_IB_HCA="^mlx5_0"),
                                       "network": net_facts(ib=["mlx5_0"])}},
     ["a: NCCL_IB_HCA=^mlx5_0 selects none of the host's RDMA devices (mlx5_0): NCCL leaves "
      "InfiniBand for TCP sockets"], []),
    ("ib-hca-on-a-host-without-ib", {"a": {"env": envf(NCCL_IB_HCA="mlx5")}},
     ["a: NCCL_IB_HCA=mlx5 selects none of the host's RDMA devices (none): NCCL leaves "
      "InfiniBand for TCP sockets"], []),
    ("ib-hca-prefix-and-port", {"a": {"env": envf(NCCL_IB_HCA="=mlx5_1:1,mlx5_0:1"),
                                      "network": net_facts(ib=["mlx5_0", "mlx5_1"])}}, [], []),
]



@pytest.mark.parametrize("hosts,fails,warns", [c[1:] for c in ENV_CASES],
                         ids=[c[0] for c in ENV_CASES])
def test_env(hosts, fails, warns):
    fs = list(env.check(cluster(**hosts)))
    assert messages(fs, Status.FAIL) == fails
    assert messages(fs, Status.WARN) == warns


def test_env_section_error():
    fs = list(env.check(cluster(a={}, b={"env": F.SectionError("KeyError")})))
    assert messages(fs, Status.COULD_NOT_CHECK) == ["b: could not read environment: KeyError"]
