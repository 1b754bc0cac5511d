"""The interfaces the job's traffic leaves a host by, from the one its route names
(hostside/netlink.carrying): a VLAN or macvlan leaves by the interface it sits on, a bond or
team by its members; a bridge's members carry other guests' traffic and are not followed.
The lookups themselves run against the kernel in tests/local/test_netlink_routes.py."""

from __future__ import annotations

from preflight.hostside.netlink import carrying

# index: (name, kind, lower, master), as interface_links says them
LINKS = {
    1: ("lo", "", 0, 0),
    2: ("eth0", "", 0, 3),
    3: ("bond0", "bond", 0, 0),
    4: ("eth1", "", 0, 3),
    5: ("bond0.100", "vlan", 3, 0),
    6: ("br0", "bridge", 0, 0),
    7: ("veth7c1e", "veth", 9, 6),
    8: ("eth2", "", 0, 6),
    10: ("mv0", "macvlan", 8, 0),
    11: ("team0", "team", 0, 0),
    12: ("eth3", "", 0, 11),
}


def test_a_plain_nic_is_itself():
    assert carrying({2}, LINKS) == ["eth0"]


def test_a_bond_leaves_by_its_members_and_a_vlan_on_it_by_both():
    assert carrying({3}, LINKS) == ["bond0", "eth0", "eth1"]
    assert carrying({5}, LINKS) == ["bond0", "bond0.100", "eth0", "eth1"]
    assert carrying({11}, LINKS) == ["eth3", "team0"]


def test_a_bridges_members_are_not_followed_a_macvlan_leaves_by_its_nic():
    # A bridge's members carry other guests' traffic (a container's veth, shaped for it).
    assert carrying({6}, LINKS) == ["br0"]
    assert carrying({10}, LINKS) == ["eth2", "mv0"]


def test_unknown_indexes_and_loops_end():
    assert carrying({99}, LINKS) == []
    looped = {1: ("a", "vlan", 2, 0), 2: ("b", "vlan", 1, 0)}
    assert carrying({1}, looped) == ["a", "b"]
    assert carrying(set(), LINKS) == []
