"""The YAML inventory: the documented shape loads; every malformed one names file/host/field."""

from __future__ import annotations

import os
import textwrap

import pytest

from preflight.inventory import InventoryError, load

pytestmark = pytest.mark.usefixtures("own_home")

GOOD = """\
defaults:
  user: root
  port: 22
  identity_file: ~/.ssh/id_ed25519
  known_hosts: ~/.ssh/known_hosts
  python: python3
hosts:
  node01: {address: 10.0.0.11}
  node02: {address: 10.0.0.12, python: /opt/paddle/bin/python}
  "gpu[03-08]": {address: "10.0.0.[13-18]"}
"""


def test_an_identity_file_that_does_not_exist_is_bad_input_before_any_connection(tmp_path):
    # OpenSSH skips a missing IdentityFile of its config; a key the inventory names is meant.
    with pytest.raises(InventoryError) as err:
        load(write(tmp_path, "hosts:\n  a: {}\n  b: {identity_file: keys/nope}\n"))
    assert str(err.value) == (f"{tmp_path / 'cluster.yaml'}:3: host 'b': field "
                              f"'identity_file': identity file {tmp_path / 'keys' / 'nope'} "
                              "does not exist")


def write(tmp_path, text: str) -> str:
    p = tmp_path / "cluster.yaml"
    p.write_text(textwrap.dedent(text))
    return str(p)


def test_documented_shape_loads_with_defaults_and_ranges(tmp_path, own_home):
    (own_home / ".ssh" / "id_ed25519").write_text("key")
    hosts = load(write(tmp_path, GOOD))
    assert [h.name for h in hosts] == ["node01", "node02"] + [f"gpu0{i}" for i in range(3, 9)]
    assert [h.address for h in hosts][2:] == [f"10.0.0.{i}" for i in range(13, 19)]
    node02 = hosts[1]
    assert node02.python == "/opt/paddle/bin/python" and hosts[0].python == "python3"
    assert all(h.ssh.user == "root" and h.ssh.port == 22 for h in hosts)
    assert hosts[0].ssh.identity_files == (os.path.expanduser("~/.ssh/id_ed25519"),)
    assert hosts[0].ssh.known_hosts[0] == os.path.expanduser("~/.ssh/known_hosts")


def test_relative_paths_are_relative_to_the_inventory(tmp_path):
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "id").write_text("key")
    hosts = load(write(tmp_path, "defaults: {identity_file: keys/id}\nhosts: {a: {}}\n"))
    assert hosts[0].ssh.identity_files == (str(tmp_path / "keys" / "id"),)
    assert hosts[0].address == "a"  # the name is the address when none is given


def test_roles_default_to_both_and_pin_a_host(tmp_path):
    hosts = load(write(tmp_path, "defaults: {roles: [worker]}\nhosts: "
                                 "{a: {}, b: {roles: server}, c: {roles: [server, worker]}}\n"))
    assert [h.roles for h in hosts] == [("worker",), ("server",), ("worker", "server")]
    assert load(write(tmp_path, "hosts: {a: {}}\n"))[0].roles == ("worker", "server")


BAD = [
    # (id, inventory text, fragments the one-line error must contain)
    ("yaml-syntax", "hosts:\n  a: {address: [\n", ["cluster.yaml:", "invalid YAML"]),
    ("unknown-top-key", "hosts: {a: {}}\nhsts: {}\n", ["field 'hsts'", "unknown key"]),
    ("unknown-host-key", "hosts:\n  a: {adress: 1.2.3.4}\n",
     ["cluster.yaml:2", "host 'a'", "field 'adress'", "unknown key"]),
    ("unknown-default-key", "defaults: {pyton: x}\nhosts: {a: {}}\n", ["field 'pyton'"]),
    ("duplicate-host-key", "hosts:\n  a: {}\n  a: {}\n",
     ["cluster.yaml:3", "duplicate key 'a'", "first on line 2"]),
    ("duplicate-after-expansion", "hosts:\n  n1: {}\n  'n[1-2]': {}\n",
     ["host 'n1'", "field 'name'", "duplicate host"]),
    ("bad-port", "hosts:\n  a: {port: 70000}\n", ["host 'a'", "field 'port'", "70000"]),
    ("port-string", "hosts:\n  a: {port: '22'}\n", ["field 'port'", "not a TCP port"]),
    ("range-lengths", "hosts:\n  'gpu[1-3]': {address: '10.0.0.[1-2]'}\n",
     ["host 'gpu[1-3]'", "field 'address'", "2 address(es)", "3 host(s)"]),
    ("bad-range", "hosts:\n  'gpu[1-': {}\n", ["host 'gpu[1-'", "field 'name'",
                                                "bad hostlist range"]),
    ("option-like-address", "hosts:\n  a: {address: '-oProxyCommand=touch x'}\n",
     ["host 'a'", "field 'address'"]),
    ("shell-in-name", "hosts:\n  'a;rm': {}\n", ["field 'name'"]),
    ("option-like-user", "hosts:\n  a: {user: '-l'}\n", ["field 'user'"]),
    ("newline-python", "hosts:\n  a: {python: \"py\\nrm -rf /\"}\n", ["field 'python'"]),
    ("no-hosts", "defaults: {}\n", ["field 'hosts'"]),
    ("unknown-role", "hosts:\n  a: {roles: [trainer]}\n", ["host 'a'", "field 'roles'"]),
    ("empty-roles", "hosts:\n  a: {roles: []}\n", ["field 'roles'"]),
    ("hosts-list", "hosts: [a, b]\n", ["field 'hosts'"]),
    ("not-a-mapping", "- a\n", ["not an inventory preflight reads", "accepted: ",
                                 "Ansible", "hostfile"]),
    ("host-entry-scalar", "hosts:\n  a: 1\n", ["host 'a'", "expected a mapping"]),
]


@pytest.mark.parametrize("text,fragments", [(t, f) for _, t, f in BAD], ids=[i for i, _, _ in BAD])
def test_malformed_inventory_names_file_host_field(tmp_path, text, fragments):
    path = write(tmp_path, text)
    with pytest.raises(InventoryError) as err:
        load(path)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(path)
    for frag in fragments:
        assert frag in msg


def test_missing_file(tmp_path):
    with pytest.raises(InventoryError, match="no such file"):
        load(str(tmp_path / "nope.yaml"))
