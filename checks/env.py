"""Training environment variables: alike on every host, and none set to a value known to hurt."""

from __future__ import annotations

from collections.abc import Iterator

from preflight.checks.common import compare, could_not_check, passed, sections
from preflight.model.cluster import Cluster
from preflight.model.facts import EnvFacts, NetworkFacts
from preflight.model.findings import Finding, Status

NAME = "env"
UNSET = "unset"
# Ranks that disagree on NCCL or Paddle flags pick different algorithms or protocols and hang
# or desynchronise; logging differences (GLOG_*) only make logs harder to read.
DRIFT_FAILS = ("NCCL_", "FLAGS_", "PADDLE_")


def socket_ifname_matches(value: str, names: list[str]) -> bool:
    """NCCL_SOCKET_IFNAME semantics: a comma list of name prefixes; a leading '^' makes the
    whole list exclusions, a leading '=' makes it exact names (NCCL environment docs)."""
    exclude = value.startswith("^")
    value = value[1:] if exclude else value
    exact = value.startswith("=")
    value = value[1:] if exact else value
    wanted = [v.strip() for v in value.split(",") if v.strip()]

    def hit(name: str) -> bool:
        return any(name == w if exact else name.startswith(w) for w in wanted)
    return any(not hit(n) for n in names) if exclude else any(hit(n) for n in names)


def _hurtful(env: dict[str, str], net: object) -> Iterator[tuple[Status, str]]:
    if env.get("NCCL_DEBUG", "").upper() in ("INFO", "TRACE"):
        yield Status.WARN, (f"NCCL_DEBUG={env['NCCL_DEBUG']} slows NCCL calls and floods the "
                            "logs: use WARN outside debugging")
    if env.get("NCCL_P2P_DISABLE") == "1":
        yield Status.WARN, ("NCCL_P2P_DISABLE=1 sends GPU-to-GPU traffic through host memory "
                            "instead of NVLink/PCIe peer-to-peer")
    if isinstance(net, NetworkFacts):
        if env.get("NCCL_IB_DISABLE") == "1" and net.infiniband:
            yield Status.FAIL, (f"NCCL_IB_DISABLE=1 on a host with InfiniBand "
                                f"({', '.join(net.infiniband)}): NCCL falls back to TCP sockets")
        ifname = env.get("NCCL_SOCKET_IFNAME")
        names = [i.name for i in net.interfaces]
        if ifname and not socket_ifname_matches(ifname, names):
            yield Status.FAIL, (f"NCCL_SOCKET_IFNAME={ifname} matches none of the host's "
                                f"interfaces ({', '.join(names)}): NCCL cannot bootstrap")
        gloo = env.get("GLOO_SOCKET_IFNAME")  # one exact name (Paddle's gloo_utils.cc)
        if gloo and gloo not in names:
            yield Status.FAIL, (f"GLOO_SOCKET_IFNAME={gloo} is none of the host's interfaces "
                                f"({', '.join(names)}): gloo (CPU collectives) cannot start")


def check(cluster: Cluster) -> Iterator[Finding]:
    envs, missing = sections(cluster, lambda f: f.env, EnvFacts)
    yield from could_not_check(NAME, "environment", missing)
    if not envs:
        return
    values = {h: dict(e.vars) for h, e in envs.items()}
    names = sorted({k for v in values.values() for k in v})
    bad: list[Finding] = []
    for var in names:
        status = Status.FAIL if var.startswith(DRIFT_FAILS) else Status.WARN
        bad += compare(NAME, var, {h: v.get(var, UNSET) for h, v in values.items()},
                       status=status)
    facts = dict(cluster.probed())
    for host, env in values.items():
        for status, text in _hurtful(env, facts[host].network):
            bad.append(Finding(NAME, status, (host,), f"{host}: {text}", {}))
    yield from bad
    if not any(f.status is Status.FAIL for f in bad):
        yield passed(NAME, envs, f"{len(names)} training variables alike on {len(envs)} hosts",
                     variables=names)
