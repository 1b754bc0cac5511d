"""A report with every part, and the paths to its parts: what the report tests read back,
replace and fill."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from support import REFUSED, G, cluster, paddle, report_doc, slow_host, survey

from preflight import judge as J
from preflight.model.measure import AllReduce, NetworkTests, SizeResult
from preflight.placement.planner import plan as make_plan

HOSTS = ["node01", "node02", "node03", "node04"]


def full_doc() -> dict[str, Any]:
    """A report with every part: hosts (one unreachable), findings, links, an all-reduce
    and a plan that leaves hosts out."""
    sizes = tuple(SizeResult(m << 20, m * 0.004, 4) for m in (1, 8))
    net = NetworkTests("ring", tuple(HOSTS), tuple(survey(HOSTS, slow_host("node03", 0.1 * G,
                                                                             10 * G))),
                       AllReduce("gloo", ("node01", "node02"), 2, sizes,
                                 dropped=("32 MiB",), progress={"node01": "done"}))
    c = replace(cluster(node01={}, node02={}, node03={"paddle": paddle("2.6.2")},
                        node04=REFUSED), network=net)
    findings = J.run_checks(c)
    plan = make_plan(c, findings, {h: f"10.0.0.{i}" for i, h in enumerate(HOSTS, 1)})
    return report_doc(c, J.judge(c, findings, plan), plan, started_at=1.0, duration_s=2.0)


def paths(value: Any, path: tuple[Any, ...] = (), items: int = 3) -> list[tuple[Any, ...]]:
    """Every path into value (a list's first `items` items), the empty one first."""
    out = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            out += paths(v, (*path, k), items)
    elif isinstance(value, list):
        for i, v in enumerate(value[:items]):
            out += paths(v, (*path, i), items)
    return out
