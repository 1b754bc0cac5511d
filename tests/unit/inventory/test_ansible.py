"""Ansible inventories, read as Ansible reads them: the examples of Ansible's own
documentation (the ini and yaml inventory plugins' EXAMPLES, the inventory guide), groups,
children, variable precedence, and the variables that say how to reach a host."""

from __future__ import annotations

import textwrap

import pytest

from preflight.inventory import InventoryError, load, read
from preflight.inventory.ansible import expand_pattern

pytestmark = pytest.mark.usefixtures("own_home")

# ansible/plugins/inventory/ini.py, EXAMPLES, "Example 1" (as published, comments included).
INI_EXAMPLE_1 = """\
[web]
host1
host2 ansible_port=222 # defined inline, interpreted as an integer

[web:vars]
http_port=8080 # all members of 'web' will inherit these
myvar=23 # defined in a :vars section, interpreted as a string

[web:children] # child groups will automatically add their hosts to parent group
apache
nginx

[apache]
tomcat1
tomcat2 myvar=34 # host specific vars override group vars
tomcat3 mysecret="'03#pa33w0rd'" # proper quoting to prevent value changes

[nginx]
jenkins1

[nginx:vars]
has_java = True # vars in child groups override same in parent

[all:vars]
has_java = False # 'all' is 'top' parent
"""

# ... and "Example 2".
INI_EXAMPLE_2 = """\
host1 # this is 'ungrouped'

# both hosts have same IP but diff ports, also 'ungrouped'
host2 ansible_host=127.0.0.1 ansible_port=44
host3 ansible_host=127.0.0.1 ansible_port=45

[g1]
host4

[g2]
host4 # same host as above, but member of 2 groups, will inherit vars from both
      # inventory hostnames are unique
"""

# ansible/plugins/inventory/yaml.py, EXAMPLES.
YAML_EXAMPLE = """\
all: # keys must be unique, i.e. only one 'hosts' per group
    hosts:
        test1:
        test2:
            host_var: value
    vars:
        group_all_var: value
    children:   # key order does not matter, indentation does
        other_group:
            children:
                group_x:
                    hosts:
                        test5   # Note that one machine will work without a colon
                group_y:
                    hosts:
                        test6:  # So always use a colon
            vars:
                g2_var2: value3
            hosts:
                test4:
                    ansible_host: 127.0.0.1
        last_group:
            hosts:
                test1 # same host as above, additional group membership
            vars:
                group_last_var: value
"""

# The inventory guide (intro_inventory): the basic INI and "the same in YAML".
GUIDE_INI = """\
mail.example.com

[webservers]
foo.example.com
bar.example.com

[dbservers]
one.example.com
two.example.com
three.example.com
"""
GUIDE_YAML = """\
all:
  hosts:
    mail.example.com:
  children:
    webservers:
      hosts:
        foo.example.com:
        bar.example.com:
    dbservers:
      hosts:
        one.example.com:
        two.example.com:
        three.example.com:
"""


def write(tmp_path, text: str, name: str = "hosts") -> str:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return str(p)


def by_name(hosts):
    return {h.name: h for h in hosts}


def test_ini_example_1_groups_children_and_inline_port(tmp_path):
    inv = read(write(tmp_path, INI_EXAMPLE_1))
    assert inv.fmt == "ansible-ini"
    hosts = by_name(load(write(tmp_path, INI_EXAMPLE_1)))
    assert list(hosts) == ["host1", "host2", "tomcat1", "tomcat2", "tomcat3", "jenkins1"]
    assert hosts["host2"].ssh.port == 222 and hosts["host1"].ssh.port == 22
    # Children add their hosts to the parent group.
    assert set(hosts["tomcat1"].groups) == {"apache", "web"}
    assert set(hosts["jenkins1"].groups) == {"nginx", "web"}


def test_ini_example_2_ports_and_a_host_in_two_groups(tmp_path):
    hosts = by_name(load(write(tmp_path, INI_EXAMPLE_2)))
    assert (hosts["host2"].address, hosts["host2"].ssh.port) == ("127.0.0.1", 44)
    assert (hosts["host3"].address, hosts["host3"].ssh.port) == ("127.0.0.1", 45)
    assert set(hosts["host4"].groups) == {"g1", "g2"}
    assert hosts["host1"].groups == ("ungrouped",)


def test_yaml_example_nested_children_and_one_host_without_colon(tmp_path):
    inv = read(write(tmp_path, YAML_EXAMPLE, "hosts.yml"))
    assert inv.fmt == "ansible-yaml"
    hosts = by_name(load(write(tmp_path, YAML_EXAMPLE, "hosts.yml")))
    assert set(hosts) == {"test1", "test2", "test4", "test5", "test6"}
    assert hosts["test4"].address == "127.0.0.1"
    assert set(hosts["test5"].groups) == {"group_x", "other_group"}
    assert set(hosts["test1"].groups) == {"last_group"}


def test_the_guide_ini_and_yaml_give_the_same_hosts(tmp_path):
    ini = load(write(tmp_path, GUIDE_INI))
    yml = load(write(tmp_path, GUIDE_YAML, "hosts.yaml"))
    assert [(h.name, h.address, set(h.groups) - {"ungrouped"}) for h in ini] == \
        [(h.name, h.address, set(h.groups)) for h in yml]


PRECEDENCE = """\
[all:vars]
ansible_user=fromall
ansible_port=2200

[gpu:children]
a100

[gpu:vars]
ansible_user=fromgpu
ansible_python_interpreter=/opt/gpu/bin/python

[a100]
n1
n2 ansible_user=fromhost

[a100:vars]
ansible_port=2222
"""


def test_variables_all_then_parent_then_child_then_host(tmp_path):
    hosts = by_name(load(write(tmp_path, PRECEDENCE)))
    assert (hosts["n1"].ssh.user, hosts["n1"].ssh.port) == ("fromgpu", 2222)
    assert hosts["n2"].ssh.user == "fromhost"
    assert hosts["n1"].python == hosts["n1"].probe_python == "/opt/gpu/bin/python"


def test_connection_variables_are_read(tmp_path, own_home):
    (own_home / ".ssh" / "cluster_key").write_text("key")
    text = """\
    [gpus]
    g[01:03] ansible_host=10.0.0.5 ansible_ssh_private_key_file=~/.ssh/cluster_key

    [gpus:vars]
    ansible_ssh_user=ops
    ansible_ssh_common_args='-o ProxyJump=jumper@login.example.com:2222'
    preflight_python=/opt/paddle/bin/python
    preflight_roles=worker
    ansible_password=secret
    """
    hosts = load(write(tmp_path, text))
    assert [h.name for h in hosts] == ["g01", "g02", "g03"]
    g = hosts[0]
    assert g.ssh.user == "ops" and g.address == "10.0.0.5"
    key = g.ssh.identity_files[0]
    assert key.endswith("/.ssh/cluster_key") and "~" not in key
    assert g.python == "/opt/paddle/bin/python" and g.probe_python == "python3"
    assert g.roles == ("worker",)
    assert [(j.ssh.user, j.address, j.ssh.port) for j in g.ssh.jump] == [
        ("jumper", "login.example.com", 2222)]
    (own_home / ".ssh" / "cluster_key").unlink()
    with pytest.raises(InventoryError, match=r"hosts:2: host 'g01': field "
                       r"'ansible_ssh_private_key_file': identity file .*/\.ssh/cluster_key "
                       "does not exist"):
        load(write(tmp_path, text))
    assert "secret" not in repr(hosts)  # a password is never read


@pytest.mark.parametrize("args,hop", [
    ("-J bastion", "bastion"),
    ("-o ProxyCommand='ssh -W %h:%p -q ops@bastion'", "ops@bastion"),
    ("-oProxyJump=b1,b2", "b1,b2"),
])
def test_proxy_jump_in_ssh_args(tmp_path, args, hop):
    text = f'n1 ansible_ssh_common_args="{args}"\n'
    hosts = load(write(tmp_path, text))
    names = [j.name for j in hosts[0].ssh.jump]
    assert names == [p.split("@")[-1] for p in hop.split(",")]


@pytest.mark.parametrize("pattern,expected", [
    ("www[01:03].example.com", ["www01.example.com", "www02.example.com",
                                "www03.example.com"]),
    ("db-[a:c]", ["db-a", "db-b", "db-c"]),
    ("h[0:6:3]", ["h0", "h3", "h6"]),
    ("r[1:2]n[1:2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ("plain", ["plain"]),
])
def test_host_ranges(pattern, expected):
    assert expand_pattern(pattern) == expected


BAD = [
    ("section-kind", "[web:hosts2]\nh1\n", ["hosts:1", "bad section"]),
    ("host-var-without-equals", "[web]\nh1 port\n", ["hosts:2", "host 'h1'", "key=value"]),
    ("bad-range", "[web]\nh[1:]\n", ["hosts:2", "field 'name'"]),
    ("bad-port", "h1 ansible_port=99999\n", ["host 'h1'", "field 'ansible_port'"]),
    ("bad-address", "h1 ansible_host='-oProxyCommand=x'\n", ["host 'h1'",
                                                              "field 'ansible_host'"]),
    ("local-connection", "h1 ansible_connection=local\n", ["ansible_connection=local",
                                                           "not supported"]),
    ("typo-preflight-var", "h1 preflight_pyton=/x\n", ["field 'preflight_pyton'",
                                                       "unknown variable"]),
    ("unsupported-proxycommand", "h1 ansible_ssh_common_args=\"-o ProxyCommand='nc %h %p'\"\n",
     ["ProxyCommand", "-J HOST"]),
    ("vars-without-equals", "[g:vars]\njust words\n", ["hosts:2", "key=value"]),
    ("unclosed-quote", "h1 a='b\n", ["hosts:1", "cannot split"]),
]


@pytest.mark.parametrize("text,fragments", [(t, f) for _, t, f in BAD], ids=[i for i, *_ in BAD])
def test_bad_ini_is_one_line_naming_file_line_host_field(tmp_path, text, fragments):
    path = write(tmp_path, text)
    with pytest.raises(InventoryError) as err:
        load(path)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(path)
    for frag in fragments:
        assert frag in msg, msg


BAD_YAML = [
    ("group-not-mapping", "all:\n  children:\n    web: [a, b]\n", ["field 'web'",
                                                                   "expected a mapping"]),
    ("unknown-group-key", "all:\n  hosts:\n    a:\n  childs:\n    b:\n", None),
    ("host-vars-list", "all:\n  hosts:\n    a: [1]\n", ["host 'a'", "host variables"]),
    ("cycle", "all:\n  children:\n    a:\n      children:\n        a:\n", ["own child"]),
]


@pytest.mark.parametrize("text,fragments", [(t, f) for _, t, f in BAD_YAML],
                         ids=[i for i, *_ in BAD_YAML])
def test_bad_ansible_yaml_is_one_line(tmp_path, text, fragments):
    path = write(tmp_path, text, "inv.yml")
    with pytest.raises(InventoryError) as err:
        load(path, "ansible-yaml")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(path)
    for frag in fragments or ["unknown key"]:
        assert frag in msg, msg
