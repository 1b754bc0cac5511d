"""Inputs as an attacker or a clumsy user writes them, refused in one line naming the file
(exit 2), never built, never an internal error: a few hundred bytes that would name millions
of hosts or nodes (nested YAML aliases in preflight's YAML, an Ansible YAML inventory and a
policy; one host range written on many lines; ranges that each stay under the cap), a file
larger than any inventory, names that differ only in case, a bad ProxyJump in Ansible's SSH
arguments. A message never builds the whole repr of a value it quotes."""

from __future__ import annotations

import pytest

from preflight.config.errors import InputError, read_input, shown
from preflight.config.policy import load_policy
from preflight.inventory import InventoryError, load
from preflight.inventory import validate as V

pytestmark = [pytest.mark.usefixtures("own_home"), pytest.mark.timeout(60)]

# Nine levels of nine aliases: 9**9 (387 million) copies of the last list, written out.
LAUGHS = "".join(f"  - &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]\n" for i in range(1, 10))
BOMB_ROOT = '  - &l0 ["lol"]\n' + LAUGHS


def _quick(fn, *args) -> str:
    """fn(*args)'s InputError. Each input here, built, would take minutes and gigabytes: the
    module's time limit bounds the wait, not a duration asserted on a noisy machine."""
    with pytest.raises(InputError) as err:
        fn(*args)
    return str(err.value)


def _refused(path, text: str) -> str:
    """What loading an inventory of text at path says as it refuses it."""
    path.write_text(text)
    return _quick(load, str(path))


@pytest.mark.parametrize("text", [
    # preflight's own YAML: the aliases under a host's roles
    "hosts:\n  node01:\n    roles:\n" + BOMB_ROOT.replace("  - ", "      - "),
    # an Ansible YAML inventory: the aliases in a group's vars
    "all:\n  hosts:\n    node01:\n  vars:\n    x:\n" + BOMB_ROOT.replace("  - ", "      - "),
], ids=["preflight-yaml", "ansible-yaml"])
def test_nested_aliases_are_refused_before_they_are_built(tmp_path, text):
    path = tmp_path / "cluster.yaml"
    assert len(text) < 600
    said = _refused(path, text)
    assert said.startswith(f"{path}:") and "its aliases would write out over 100,000 more " \
        "nodes (nested aliases: refused)" in said, said
    assert "\n" not in said


def test_a_policy_of_nested_aliases_is_refused_too(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text("require:\n" + BOMB_ROOT)
    said = _quick(load_policy, str(path))
    assert "nested aliases: refused" in said, said


def test_an_alias_inside_itself_is_refused(tmp_path):
    path = tmp_path / "cluster.yaml"
    said = _refused(path, "hosts:\n  node01:\n    roles: &r [worker, *r]\n")
    assert "an alias inside the node it names (refused)" in said, said


def test_an_anchor_reused_as_users_write_them_still_loads(tmp_path):
    path = tmp_path / "inventory.yaml"
    path.write_text("all:\n  children:\n"
                    "    a:\n      hosts: {node01: , node02: }\n"
                    "      vars: &common {preflight_python: /opt/p/bin/python, ansible_user: u}\n"
                    "    b:\n      hosts: {node03: }\n      vars: *common\n")
    hosts = load(str(path))
    assert [h.name for h in hosts] == ["node01", "node02", "node03"]
    assert {h.python for h in hosts} == {"/opt/p/bin/python"}


def test_one_range_on_many_lines_names_no_more_than_the_cap(tmp_path):
    # 200 lines of an INI range each under the cap: 4 million names from 4 KiB.
    path = tmp_path / "hosts.ini"
    said = _refused(path, "[all]\n" + "".join(f"g{i}[0:19999]\n" for i in range(200)))
    assert f"names more than the {V.MAX_HOSTS:,} hosts preflight accepts in all" in said, said
    said = _refused(tmp_path / "repeated.ini",
                    "".join(f"[g{i}]\nnode[0:19999]\n" for i in range(200)))
    assert "writes over 200,000 host names, repeats included" in said, said


def test_ranges_each_under_the_cap_are_held_to_it_together(tmp_path):
    path = tmp_path / "cluster.yaml"
    said = _refused(path, "hosts:\n" + "".join(f'  "g{i}n[0-9999]": {{}}\n'
                                                for i in range(200)))
    assert "names more than the 20,000 hosts preflight accepts in all (20,000 before this " \
           "range, which adds 10,000" in said, said
    assert said.startswith(f"{path}:4: host 'g2n[0-9999]': field 'name':"), said


def test_a_hostfile_past_the_cap_is_refused(tmp_path):
    path = tmp_path / "hostfile"
    said = _refused(path, "".join(f"node{i} slots=8\n" for i in range(V.MAX_HOSTS + 1)))
    assert f"lists more than the {V.MAX_HOSTS:,} hosts" in said, said


def test_a_file_larger_than_any_input_is_refused_without_reading_it_all(tmp_path):
    path = tmp_path / "big.yaml"
    with open(path, "w") as fh:
        fh.write("#" * 1000 + "\n")
        fh.truncate(64 << 20)  # sparse: 64 MiB that cost nothing to make
    with pytest.raises(InventoryError) as err:
        read_input(str(path), InventoryError, limit=1 << 20)
    assert str(err.value) == f"{path}: larger than the 1 MiB preflight reads as this input"


def test_a_message_never_builds_the_whole_repr_of_what_it_quotes():
    shared: list[object] = ["lol"]
    for _ in range(30):  # 2**30 strings written out, as aliases build them
        shared = [shared, shared]
    text = shown(shared, 80)  # the whole repr: 2**30 strings, past the module's time limit
    assert len(text) <= 80 and text.startswith("[[[")
    assert shown("x" * 10_000, 40).endswith("...") and len(shown("x" * 10_000, 40)) == 40


@pytest.mark.parametrize("name,text", [
    ("cluster.yaml", "hosts:\n  node01: {}\n  NODE01: {}\n"),
    ("hosts.ini", "[gpu]\nnode01\n[cpu]\nNode01\n"),
    ("hostfile", "node01 slots=8\nNODE01 slots=8\n"),
], ids=["yaml", "ansible-ini", "hostfile"])
def test_names_that_differ_only_in_case_are_one_host_twice(tmp_path, name, text):
    path = tmp_path / name
    said = _refused(path, text)
    assert said.startswith(f"{path}") and "duplicate host: the same name as 'node01' (host " \
        "names are not case-sensitive)" in said, said
    with pytest.raises(InventoryError, match="not case-sensitive"):
        load("node01,NODE01")


@pytest.mark.parametrize("args", ["-o ProxyJump=bad:port:x", "-J user@host:99999"])
def test_a_bad_proxyjump_in_ansibles_ssh_args_is_bad_input_naming_the_field(tmp_path, args):
    path = tmp_path / "hosts.ini"
    said = _refused(path, f"[g]\nnode01 ansible_host=127.0.0.1 ansible_ssh_common_args="
                          f"'{args}'\n")
    assert said.startswith(f"{path}:2: host 'node01': field 'ansible_ssh_common_args': its "
                           "ProxyJump: "), said


def test_an_empty_host_name_is_refused_not_an_inventory_of_no_hosts(tmp_path):
    path = tmp_path / "cluster.yaml"
    said = _refused(path, 'hosts:\n  node01: {}\n  "": {}\n')
    assert said == f"{path}:3: host '': field 'name': an empty host name"


@pytest.mark.parametrize("line", ["node01 slots=99999999999999999999", "node01:100000",
                                  "node01 slots=0"])
def test_slots_no_host_could_run_are_refused(tmp_path, line):
    path = tmp_path / "hostfile"
    said = _refused(path, f"{line}\nnode02 slots=8\n")
    assert said == f"{path}:1: host 'node01': field 'slots': slots must be from 1 to 4,096 " \
        "(ranks on one host)"
