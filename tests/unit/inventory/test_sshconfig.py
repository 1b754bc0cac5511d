"""The user's OpenSSH config applied as `ssh NAME` applies it: aliases, HostName, User, Port,
IdentityFile, ProxyJump hops (each looked up itself), ProxyCommand's `ssh -W`, Include,
first value wins, the inventory's values win over the config, the current user by default."""

from __future__ import annotations

import textwrap

import pytest

from preflight.inventory import InventoryError, load
from preflight.model.host import local_user

pytestmark = pytest.mark.usefixtures("own_home")

CONFIG = """\
Host login
    HostName login.cluster.example.org
    User ops
    Port 2200
    IdentityFile ~/.ssh/login_key

Host gpu*
    HostName %h.internal
    ProxyJump login
    User trainer
    IdentityFile ~/.ssh/gpu_key
    UserKnownHostsFile ~/.ssh/cluster_known_hosts
    ConnectTimeout 7

Host gpu01
    # first obtained value wins: the gpu* block above already set User
    User ignored
    HostKeyAlias gpu01-key

Host deep
    ProxyJump login,gpu02

Host old
    ProxyCommand ssh -W %h:%p -l ops -p 2200 login.cluster.example.org

Host netcat
    ProxyCommand nc %h %p

Host *
    Port 22
    HashKnownHosts yes
"""


def config(home, text: str = CONFIG) -> str:
    p = home / ".ssh" / "config"
    p.write_text(textwrap.dedent(text))
    return str(p)


def inventory(tmp_path, text: str) -> str:
    p = tmp_path / "hosts"
    p.write_text(text)
    return str(p)


def test_aliases_resolve_through_the_config(tmp_path, own_home):
    config(own_home)
    (gpu01, gpu02) = load(inventory(tmp_path, "gpu01\ngpu02\n"))
    assert (gpu01.name, gpu01.address, gpu01.ssh.user, gpu01.ssh.port) == \
        ("gpu01", "gpu01.internal", "trainer", 22)
    assert gpu01.ssh.identity_files == (str(own_home / ".ssh" / "gpu_key"),)
    assert gpu01.ssh.known_hosts[0] == str(own_home / ".ssh" / "cluster_known_hosts")
    assert "/etc/ssh/ssh_known_hosts" in gpu01.ssh.known_hosts  # the global file is read too
    assert gpu01.ssh.connect_timeout == 7 and gpu01.ssh.hash_known_hosts
    assert gpu01.ssh.host_key_alias == "gpu01-key" and gpu01.key_names == ("gpu01-key",)
    assert gpu02.key_names == ("gpu02.internal", "gpu02")
    [hop] = gpu01.ssh.jump
    assert (hop.name, hop.address, hop.ssh.user, hop.ssh.port) == \
        ("login", "login.cluster.example.org", "ops", 2200)
    assert hop.ssh.identity_files == (str(own_home / ".ssh" / "login_key"),)
    assert hop.key_names == ("[login.cluster.example.org]:2200", "[login]:2200")
    assert hop.ssh.jump == ()


def test_the_inventory_wins_over_the_config(tmp_path, own_home):
    config(own_home)
    path = tmp_path / "c.yaml"
    path.write_text("hosts:\n  gpu01: {address: 10.1.1.1, user: alice, port: 2022, "
                    "jump: 'bob@other:23'}\n")
    [h] = load(str(path))
    assert (h.address, h.ssh.user, h.ssh.port) == ("10.1.1.1", "alice", 2022)
    assert [(j.ssh.user, j.name, j.ssh.port) for j in h.ssh.jump] == [("bob", "other", 23)]


def test_hops_in_order_each_resolved(tmp_path, own_home):
    config(own_home)
    [h] = load(inventory(tmp_path, "deep\n"))
    # login first, then gpu02 (reached through login, not through its own ProxyJump).
    assert [(j.name, j.address, j.ssh.user) for j in h.ssh.jump] == [
        ("login", "login.cluster.example.org", "ops"), ("gpu02", "gpu02.internal", "trainer")]


def test_classic_proxycommand_is_a_jump(tmp_path, own_home):
    config(own_home)
    [h] = load(inventory(tmp_path, "old\n"))
    assert [(j.ssh.user, j.address, j.ssh.port) for j in h.ssh.jump] == [
        ("ops", "login.cluster.example.org", 2200)]


def test_other_proxycommands_are_refused_with_the_way_out(tmp_path, own_home):
    config(own_home)
    with pytest.raises(InventoryError, match="host 'netcat': field 'ProxyCommand': .*ProxyJump"):
        load(inventory(tmp_path, "netcat\n"))


def test_no_config_the_current_user_and_port_22(tmp_path, own_home):
    [h] = load(inventory(tmp_path, "node07\n"), ssh_config="none")
    assert (h.address, h.ssh.user, h.ssh.port, h.ssh.jump) == ("node07", local_user(), 22, ())
    assert h.ssh.known_hosts[:2] == (str(own_home / ".ssh" / "known_hosts"),
                                 str(own_home / ".ssh" / "known_hosts2"))


def test_an_explicit_config_file_and_include(tmp_path, own_home):
    (own_home / ".ssh" / "conf.d").mkdir()
    (own_home / ".ssh" / "conf.d" / "cluster.conf").write_text(
        "Host n*\n    User fromincluded\n    Port 2222\n")
    cfg = tmp_path / "my_ssh_config"
    cfg.write_text("Include conf.d/*.conf\nHost *\n    User fallback\n")
    config(own_home, "Host *\n    User fromdefaultconfig\n")
    [h] = load(inventory(tmp_path, "n1\n"), ssh_config=str(cfg))
    assert (h.ssh.user, h.ssh.port) == ("fromincluded", 2222)
    [h] = load(inventory(tmp_path, "n1\n"))  # without -F: ~/.ssh/config
    assert h.ssh.user == "fromdefaultconfig"


def test_the_inventory_names_its_config(tmp_path, own_home):
    cfg = tmp_path / "cluster_ssh_config"
    cfg.write_text("Host n1\n    HostName 10.9.9.9\n")
    path = tmp_path / "c.yaml"
    path.write_text("defaults: {ssh_config: cluster_ssh_config}\nhosts: {n1: {}}\n")
    assert load(str(path))[0].address == "10.9.9.9"


def test_a_bastion_matched_by_host_star_goes_direct(tmp_path, own_home):
    config(own_home, "Host bastion\n    HostName 10.0.0.1\nHost *\n    ProxyJump bastion\n")
    [n1, bastion] = load(inventory(tmp_path, "n1\nbastion\n"))
    assert [j.name for j in n1.ssh.jump] == ["bastion"] and bastion.ssh.jump == ()


BAD = [
    ("loop", "Host a\n    ProxyJump b\nHost b\n    ProxyJump a\n", "a\n",
     ["ProxyJump", "loop"]),
    ("bad-hostname", "Host a\n    HostName bad;name\n", "a\n",
     ["field 'HostName'", "host 'a'"]),
    ("bad-port", "Host a\n    Port twenty\n", "a\n", ["field 'Port'"]),
    ("bad-hop", "Host a\n    ProxyJump -oProxyCommand=x\n", "a\n", ["field 'ProxyJump'"]),
]


@pytest.mark.parametrize("cfg,hosts,fragments", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_config_values_are_one_line_naming_the_config(tmp_path, own_home, cfg, hosts,
                                                          fragments):
    config(own_home, cfg)
    with pytest.raises(InventoryError) as err:
        load(inventory(tmp_path, hosts))
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("~/.ssh/config")
    for frag in fragments:
        assert frag in msg, msg


def test_a_missing_config_file_is_one_line(tmp_path):
    with pytest.raises(InventoryError, match="no such OpenSSH config file"):
        load(inventory(tmp_path, "a\n"), ssh_config=str(tmp_path / "nope"))
