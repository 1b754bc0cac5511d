"""`container:` in a YAML inventory (defaults and hosts), the policy and the command line,
merged per host: the nearer layer wins, key by key."""

from __future__ import annotations

import pytest

from preflight.config.container import layer
from preflight.config.document import Fields
from preflight.config.errors import InputError
from preflight.inventory import load
from preflight.model.container import ContainerSpec

INVENTORY = """\
defaults:
  container:
    runtime: podman
    shm_size: 16g
hosts:
  node0[1-2]:
    address: 10.0.0.[1-2]
  node03:
    address: 10.0.0.3
    container:
      name: dev-box
  node04:
    address: 10.0.0.4
    container:
      ulimits: {memlock: -1}
"""


def test_each_host_gets_its_layers_merged(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text(INVENTORY)
    policy = layer(Fields("policy.yaml", {"runtime": "docker", "image": "paddle:3.3.1",
                                          "ipc": "host"}, "container"))
    hosts = {h.name: h.container for h in load(str(inv), containers=(policy, None))}
    base = ContainerSpec("podman", image="paddle:3.3.1", ipc="host", shm_size="16g")
    assert hosts["node01"] == hosts["node02"] == base
    assert hosts["node03"] == ContainerSpec("podman", name="dev-box", ipc="host",
                                            shm_size="16g")
    assert hosts["node04"] == ContainerSpec("podman", image="paddle:3.3.1", ipc="host",
                                            shm_size="16g", ulimits=(("memlock", "-1"),))
    # The command line's image wins everywhere, over a host's running container too.
    cli_layer = layer(Fields("command line", {"image": "paddle:3.3.2"}))
    cli = {h.name: h.container for h in load(str(inv), containers=(policy, cli_layer))}
    assert {s.image for s in cli.values() if s} == {"paddle:3.3.2"}
    assert all(s is not None and s.name is None for s in cli.values())


def test_no_container_anywhere_is_the_host(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text("hosts:\n  node01:\n    address: 10.0.0.1\n")
    assert [h.container for h in load(str(inv))] == [None]


@pytest.mark.parametrize("text, where", [
    ("hosts:\n  node01:\n    container: {image: '-x'}\n", "inv.yaml:3: host 'node01': field "
     "'container.image'"),
    ("defaults:\n  container: {shm_size: huge}\nhosts:\n  node01: {}\n",
     "field 'container.shm_size'"),
    ("hosts:\n  node01:\n    container: {runtime: podman}\n", "host 'node01': field "
     "'container': give the job's image"),
])
def test_a_bad_container_is_one_line_naming_file_host_and_field(tmp_path, text, where):
    inv = tmp_path / "inv.yaml"
    inv.write_text(text)
    with pytest.raises(InputError) as e:
        load(str(inv))
    assert where in str(e.value) and "\n" not in str(e.value), str(e.value)


ANSIBLE = """\
all:
  vars:
    preflight_container: {runtime: podman, image: "paddle:3.3.1", network: host}
  children:
    gpu:
      vars:
        preflight_container: {runtime: docker, image: "paddle:3.3.1-gpu", gpus: all}
      hosts:
        gpu01: {ansible_host: 10.0.0.1}
        gpu02:
          ansible_host: 10.0.0.2
          preflight_container: {name: trainer}
    cpu:
      hosts:
        cpu01: {ansible_host: 10.0.0.3}
"""


def test_ansible_groups_and_hosts_give_the_container_as_ansible_vars_go(tmp_path):
    inv = tmp_path / "hosts.yml"
    inv.write_text(ANSIBLE)
    got = {h.name: h.container for h in load(str(inv))}
    # As Ansible resolves a variable: the nearest group, then the host, replace it whole.
    assert got["cpu01"] == ContainerSpec("podman", image="paddle:3.3.1", network="host")
    assert got["gpu01"] == ContainerSpec("docker", image="paddle:3.3.1-gpu", gpus="all")
    assert got["gpu02"] == ContainerSpec("docker", name="trainer")
    ini = tmp_path / "hosts.ini"
    ini.write_text("[gpu]\ngpu01 ansible_host=10.0.0.1\n[gpu:vars]\n"
                   "preflight_container='{\"runtime\": \"podman\", \"image\": \"p:1\"}'\n")
    [h] = load(str(ini))
    assert h.container == ContainerSpec("podman", image="p:1")
    ini.write_text("[gpu]\ngpu01 ansible_host=10.0.0.1 preflight_container=p:1\n")
    with pytest.raises(InputError, match="field 'preflight_container': expected a mapping"):
        load(str(ini))
