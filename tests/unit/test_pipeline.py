"""One check run's stages around the plan (pipeline.py), on facts."""

from __future__ import annotations

from support import G, cluster, link, same, slow_host, survey

from preflight.model.measure import RETEST, NetworkTests
from preflight.model.policy import Policy
from preflight.pipeline import left_out_so_far


def test_the_all_reduce_leaves_out_what_the_checks_so_far_leave_out():
    c = cluster(**same(5))
    names = [o.host.name for o in c.outcomes]
    # node05's links run at a tenth of the others', confirmed alone against node01.
    net = NetworkTests("ring", tuple(names), (
        *survey(names, slow_host("node05", 0.1 * G, 1 * G)),
        link("node05", "node01", 0.1 * G, RETEST), link("node01", "node05", 0.1 * G, RETEST)))
    ips = {o.host.name: o.host.address for o in c.outcomes}
    left = left_out_so_far(Policy(), None, ips, c.outcomes, net)
    assert list(left) == ["node05"]
    assert left["node05"].startswith("bandwidth: node05: slow host")
    healthy = NetworkTests("ring", tuple(names), tuple(survey(names, lambda s, r: 1 * G)))
    assert left_out_so_far(Policy(), None, ips, c.outcomes, healthy) == {}


def test_the_python_flag_reaches_the_hosts_of_a_host_list(tmp_path, monkeypatch):
    # -i 'gpu[01-02]' --python PY: conda and venv users' training Python, on every host.
    from preflight.cli.args import build_parser
    from preflight.cli.commands import check_options
    from preflight.inventory.query import hosts_of
    from preflight.pipeline import host_query, transport_of

    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args(["check", "-i", "gpu[01-02]", "-F", "none", "--python",
                                      "/opt/conda/bin/python"])
    opts = check_options(args)
    transport = transport_of(opts)
    hosts = hosts_of(host_query(opts), transport.via, transport.alone)
    assert [(h.name, h.python) for h in hosts] == [("gpu01", "/opt/conda/bin/python"),
                                                    ("gpu02", "/opt/conda/bin/python")]
