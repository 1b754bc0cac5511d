"""Ansible inventory paths as Ansible reads them: `-i inventory/` (a directory of inventory
files with group_vars/ and host_vars/), and the group_vars/ beside one inventory file, with
Ansible's precedence and errors that name the file that set a bad value."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from preflight.inventory import InventoryError, load, read

pytestmark = pytest.mark.usefixtures("own_home")


def tree(root: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(root)


def reach(source: str) -> dict[str, tuple[str, str, int, str]]:
    return {h.name: (h.address, h.ssh.user, h.ssh.port, h.python)
            for h in load(source, ssh_config="none")}


# The usual layout: a hosts file, a YAML file, group_vars (a file and a directory, one of
# its files encrypted), host_vars, and a README that is not an inventory.
LAYOUT = {
    "inventory/hosts": "[gpu]\ng1 ansible_host=10.0.0.1\ng2 ansible_host=10.0.0.2\n"
                       "[cpu]\nc1 ansible_host=10.0.1.1\n[cpu:vars]\nansible_user=ops\n",
    "inventory/cloud.yml": "all:\n  children:\n    gpu:\n      hosts:\n"
                           "        g3: {ansible_host: 10.0.0.3}\n",
    "inventory/README.md": "# how these hosts are kept\n",
    "inventory/group_vars/all.yml": "ansible_user: train\nansible_port: 2222\n",
    "inventory/group_vars/gpu/main.yml": "preflight_python: /opt/conda/bin/python\n",
    "inventory/group_vars/gpu/vault.yml": "$ANSIBLE_VAULT;1.1;AES256\n61626364\n",
    "inventory/host_vars/g2.yaml": "ansible_port: 22\n",
}


@pytest.mark.parametrize("given", ["inventory", "inventory/"])
def test_an_inventory_directory_is_every_file_in_it_with_its_vars(tmp_path, monkeypatch,
                                                                   given):
    monkeypatch.chdir(tree(tmp_path, LAYOUT))
    # group_vars/all (train, 2222) beats the file's [cpu:vars] (ops), as in Ansible;
    # host_vars/g2 beats every group's; group_vars/gpu applies to gpu's hosts alone.
    assert reach(given) == {
        "g1": ("10.0.0.1", "train", 2222, "/opt/conda/bin/python"),
        "g2": ("10.0.0.2", "train", 22, "/opt/conda/bin/python"),
        "c1": ("10.0.1.1", "train", 2222, "python3"),
        "g3": ("10.0.0.3", "train", 2222, "/opt/conda/bin/python"),
    }
    assert {e.name: e.groups for e in read(given).entries}["g3"] == ("gpu",)


def test_group_vars_beside_an_ini_file_apply(tmp_path, monkeypatch):
    # The shape users have: hosts.ini and group_vars/all.yml in one directory.
    monkeypatch.chdir(tree(tmp_path, {
        "hosts.ini": "[gpu]\nn1\nn2 ansible_port=2200\n",
        "group_vars/all.yml": "ansible_port: 1\nansible_user: train\n",
        "group_vars/gpu.yaml": "ansible_user: gpu-train\n",
    }))
    assert reach("hosts.ini") == {"n1": ("n1", "gpu-train", 1, "python3"),
                                  "n2": ("n2", "gpu-train", 2200, "python3")}


def test_a_bad_value_in_group_vars_names_its_file_and_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tree(tmp_path, {
        "hosts.ini": "[gpu]\nn1\n",
        "group_vars/gpu.yml": "# reach them\nansible_user: train\nansible_port: twenty\n",
    }))
    with pytest.raises(InventoryError) as err:
        load("hosts.ini", ssh_config="none")
    assert str(err.value).startswith(
        f"{os.path.join(str(tmp_path), 'group_vars', 'gpu.yml')}:3: host 'n1': field "
        "'ansible_port'"), err.value


@pytest.mark.parametrize("name,text,fragment", [
    ("aws_ec2.yml", "plugin: amazon.aws.aws_ec2\nregions: [us-east-1]\n",
     "an inventory plugin's config (plugin: amazon.aws.aws_ec2) is not run by preflight "
     "(write its hosts out: ansible-inventory -i DIR --list --yaml > hosts.yml"),
    ("inventory.py", "#!/usr/bin/env python3\nprint('{}')\n",
     "an inventory script is not run by preflight"),
], ids=["plugin-config", "script"])
def test_what_a_directory_holds_that_preflight_cannot_read_is_named(tmp_path, name, text,
                                                                     fragment):
    root = tree(tmp_path, {"inv/hosts": "[gpu]\ng1\n", f"inv/{name}": text})
    os.chmod(os.path.join(root, "inv", name), 0o755)
    with pytest.raises(InventoryError) as err:
        read(os.path.join(root, "inv"))
    assert str(err.value).startswith(os.path.join(root, "inv", name) + ": ") and \
        fragment in str(err.value), err.value


def test_a_directory_without_inventory_files_or_as_another_format_is_refused(tmp_path):
    root = tree(tmp_path, {"inv/group_vars/all.yml": "ansible_user: x\n",
                           "inv/notes.txt": "g1\n"})
    with pytest.raises(InventoryError, match="inv: the directory holds no inventory file"):
        read(os.path.join(root, "inv"))
    with pytest.raises(InventoryError, match="a directory is read as an Ansible inventory, "
                                             "not as hostfile"):
        read(os.path.join(root, "inv"), "hostfile")
