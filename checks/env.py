"""Training environment variables: alike on every host, and none set to a value known to hurt."""

from __future__ import annotations

from collections.abc import Iterator

from preflight.checks.common import compare, could_not_check, job_env, passed, sections
from preflight.model.cluster import Cluster
from preflight.model.facts import EnvFacts, NetworkFacts
from preflight.model.findings import Finding, Status

NAME = "env"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
NCCL_\*, FLAGS_\*, PADDLE_\* variables identical on every host (fail; GLOG_\*, GLOO_\* and
others warn); variables that name a host's own devices are judged on each host, not by
sameness: `NCCL_SOCKET_IFNAME` selects an interface of the host that is not down (NCCL's `^`
and `=` list syntax), `GLOO_SOCKET_IFNAME` names one, `NCCL_IB_HCA` selects one of its RDMA
devices (with `:port`); `NCCL_IB_DISABLE=1` on a host with InfiniBand (fail);
`NCCL_DEBUG=INFO/TRACE`, `NCCL_P2P_DISABLE=1` (warn). Where the job runs in a container, the
variables are its container's as its process has them (the image's `ENV` and the run's
`--env`), not the login shell's, which a container does not inherit.
"""
WHY = ("NCCL_*, FLAGS_* and PADDLE_* variables choose algorithms, transports and numerics: ranks"
       " that disagree take different paths and hang, and one naming a missing interface or HCA "
       "leaves NCCL no route.")
FIX = "Set the same environment everywhere (the job's launcher or profile), or fix the value"
LIMITS: tuple[str, ...] = ()
UNSET = "unset"
# Ranks that disagree on NCCL or Paddle flags pick different algorithms or protocols and hang
# or desynchronise; logging differences (GLOG_*) only make logs harder to read.
DRIFT_FAILS = ("NCCL_", "FLAGS_", "PADDLE_")


# Legitimately different per host (NICs and HCAs are named per machine): each is judged by
# whether it resolves on its own host, never by sameness.
PER_HOST = ("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "GLOO_SOCKET_IFNAME")
DOWN = ("down", "lowerlayerdown", "notpresent", "dormant")  # operstates that carry nothing


def nccl_list_matches(value: str, names: list[str], ports: bool = False) -> list[str]:
    """Returns the names an NCCL list selects: a comma list of name prefixes; a leading '^'
    makes the whole list exclusions, a leading '=' exact names (NCCL environment docs). With
    ports, entries may carry ':port' (NCCL_IB_HCA=mlx5_0:1)."""
    exclude = value.startswith("^")
    value = value[1:] if exclude else value
    exact = value.startswith("=")
    value = value[1:] if exact else value
    wanted = [v.strip().split(":")[0] if ports else v.strip()
              for v in value.split(",") if v.strip()]

    def hit(name: str) -> bool:
        return any(name == w if exact else name.startswith(w) for w in wanted)
    return [n for n in names if hit(n) != exclude]


def _interfaces(setting: str, net: NetworkFacts, picked: list[str], none: str, what: str,
                ) -> Iterator[tuple[Status, str]]:
    """A variable that names interfaces resolves: one it picks exists and is up."""
    names = [i.name for i in net.interfaces]
    if not picked:
        yield Status.FAIL, (f"{setting} {none} the host's interfaces ({', '.join(names)}): "
                            f"{what}")
        return
    states = {i.name: (i.state or "unknown").lower() for i in net.interfaces}
    if all(states.get(n) in DOWN for n in picked):
        shown = ", ".join(f"{n} {states[n]}" for n in picked)
        yield Status.FAIL, f"{setting} selects only interfaces that are down ({shown}): {what}"


def _hurtful(env: dict[str, str], net: object) -> Iterator[tuple[Status, str]]:
    if env.get("NCCL_DEBUG", "").upper() in ("INFO", "TRACE"):
        yield Status.WARN, (f"NCCL_DEBUG={env['NCCL_DEBUG']} slows NCCL calls and floods the "
                            "logs: use WARN outside debugging")
    if env.get("NCCL_P2P_DISABLE") == "1":
        yield Status.WARN, ("NCCL_P2P_DISABLE=1 sends GPU-to-GPU traffic through host memory "
                            "instead of NVLink/PCIe peer-to-peer")
    if not isinstance(net, NetworkFacts):
        return
    if env.get("NCCL_IB_DISABLE") == "1" and net.infiniband:
        yield Status.FAIL, (f"NCCL_IB_DISABLE=1 on a host with InfiniBand "
                            f"({', '.join(net.infiniband)}): NCCL falls back to TCP sockets")
    names = [i.name for i in net.interfaces]
    ifname = env.get("NCCL_SOCKET_IFNAME")
    if ifname:
        yield from _interfaces(f"NCCL_SOCKET_IFNAME={ifname}", net,
                               nccl_list_matches(ifname, names), "matches none of",
                               "NCCL cannot bootstrap")
    gloo = env.get("GLOO_SOCKET_IFNAME")  # one exact name (Paddle's gloo_utils.cc)
    if gloo:
        yield from _interfaces(f"GLOO_SOCKET_IFNAME={gloo}", net,
                               [n for n in names if n == gloo], "is none of",
                               "gloo (CPU collectives) cannot start")
    hca = env.get("NCCL_IB_HCA")
    if hca and env.get("NCCL_IB_DISABLE") != "1":
        devices = list(net.infiniband)
        if not nccl_list_matches(hca, devices, ports=True):
            have = ", ".join(devices) or "none"
            yield Status.FAIL, (f"NCCL_IB_HCA={hca} selects none of the host's RDMA devices "
                                f"({have}): NCCL leaves InfiniBand for TCP sockets")


def check(cluster: Cluster) -> Iterator[Finding]:
    envs, missing = sections(cluster, job_env, EnvFacts)
    yield from could_not_check(NAME, "environment", missing)
    if not envs:
        return
    values = {h: dict(e.vars) for h, e in envs.items()}
    names = sorted({k for v in values.values() for k in v})
    bad: list[Finding] = []
    for var in names:
        if var in PER_HOST:
            continue  # judged on each host below
        status = Status.FAIL if var.startswith(DRIFT_FAILS) else Status.WARN
        bad += compare(NAME, var, {h: v.get(var, UNSET) for h, v in values.items()},
                       status=status)
    facts = dict(cluster.probed())
    for host, env in values.items():
        for status, text in _hurtful(env, facts[host].network):
            bad.append(Finding(NAME, status, (host,), f"{host}: {text}", {}))
    yield from bad
    if not any(f.status is Status.FAIL for f in bad):
        # One host has nothing to be alike with: what was judged is the values themselves.
        text = (f"{len(names)} training variables alike on {len(envs)} hosts" if len(envs) > 1
                else f"{len(names)} training variables, none set to a hurtful value")
        yield passed(NAME, envs, text, variables=names)
