"""The interface the kernel routes an address by, and the host's interfaces, read over
rtnetlink by the sampler (hostside/netlink.py), against iproute2's `ip route get` and
`ip -d link`, in a network namespace this test makes: a macvlan on one end of a veth pair,
a bridge holding the other."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="making a namespace needs root")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
READ = """
import json, sys
from preflight.hostside.netlink import carrying, interface_links, route_interface
links = interface_links()
routes = {a: route_interface(a) for a in sys.argv[1:]}
print(json.dumps({"links": {str(i): list(v) for i, v in links.items()},
                  "routes": routes,
                  "carrying": {a: carrying({i}, links) for a, i in routes.items() if i}}))
"""


def _ip(*args: str) -> str:
    return subprocess.run(["ip", *args], check=True, capture_output=True, text=True,
                          timeout=10).stdout


@pytest.fixture
def netns():
    name = f"pfnl{uuid.uuid4().hex[:8]}"
    _ip("netns", "add", name)
    try:
        for cmd in (["link", "add", "v0", "type", "veth", "peer", "name", "v1"],
                    ["link", "add", "mv0", "link", "v0", "type", "macvlan"],
                    ["link", "add", "br0", "type", "bridge"],
                    ["link", "set", "v1", "master", "br0"],
                    ["addr", "add", "10.77.1.1/24", "dev", "mv0"],
                    ["addr", "add", "10.77.2.1/24", "dev", "br0"]):
            _ip("-n", name, *cmd)
        for dev in ("lo", "v0", "v1", "mv0", "br0"):
            _ip("-n", name, "link", "set", dev, "up")
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10)


def test_routes_and_links_read_over_netlink_are_those_ip_shows(netns):
    peers = ["10.77.1.9", "10.77.2.9", "127.0.0.1"]
    out = subprocess.run(["ip", "netns", "exec", netns, sys.executable, "-P", "-c", READ,
                          *peers], check=True, capture_output=True, text=True, timeout=30,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    got = json.loads(out.stdout)
    shown = {link["ifindex"]: link for link in json.loads(_ip("-n", netns, "-d", "-j", "link"))}
    links = {int(i): v for i, v in got["links"].items()}
    assert set(links) == set(shown)
    for index, (name, kind, lower, master) in links.items():
        link = shown[index]
        assert name == link["ifname"], (name, link)
        assert kind == link.get("linkinfo", {}).get("info_kind", ""), (name, kind, link)
        index_of = {x["ifname"]: i for i, x in shown.items()}
        assert master == index_of.get(link.get("master"), 0), (name, master, link)
        assert lower == index_of.get(link.get("link"), 0), (name, lower, link)
    by_name = {v[0]: i for i, v in links.items()}
    for peer in peers:
        dev = json.loads(_ip("-n", netns, "-j", "route", "get", peer))[0]["dev"]
        assert got["routes"][peer] == by_name[dev], (peer, dev, got["routes"])
    assert got["carrying"]["10.77.1.9"] == ["mv0", "v0"]  # a macvlan leaves by its NIC
    assert got["carrying"]["10.77.2.9"] == ["br0"]  # a bridge's members are not followed
    assert got["carrying"]["127.0.0.1"] == ["lo"]


def test_an_address_with_no_route_is_an_error_the_sampler_keeps(netns):
    # The namespace has no default route: the kernel answers with an error, which the
    # sampler's section keeps as that peer's {"error": ...}, never a crash.
    code = ("from preflight.hostside.netlink import route_interface\n"
            "try:\n    route_interface('192.0.2.77')\nexcept RuntimeError as e:\n"
            "    print('error', e)\n")
    out = subprocess.run(["ip", "netns", "exec", netns, sys.executable, "-P", "-c", code],
                         check=True, capture_output=True, text=True, timeout=30, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": ROOT})
    assert out.stdout.startswith("error netlink error -"), out.stdout
