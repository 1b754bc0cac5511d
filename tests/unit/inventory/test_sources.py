"""Hostfiles, hosts on the command line, the Slurm allocation, format detection, --limit."""

from __future__ import annotations

import pytest

from preflight.config.errors import UsageError
from preflight.inventory import ACCEPTED, InventoryError, load, read
from preflight.inventory.limit import apply, split_items
from preflight.model.host import Host

pytestmark = pytest.mark.usefixtures("own_home")


def write(tmp_path, text: str, name: str = "hostfile") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_hostfile_slots_as_mpi_and_paddle_write_them(tmp_path):
    path = write(tmp_path, "# the cluster\nnode01 slots=8\nnode02 slots=8 max_slots=16\n"
                 "node03:4\nnode04\n\n")
    inv = read(path)
    assert inv.fmt == "hostfile"
    hosts = load(path)
    assert [(h.name, h.address, h.slots) for h in hosts] == [
        ("node01", "node01", 8), ("node02", "node02", 8), ("node03", "node03", 4),
        ("node04", "node04", None)]


@pytest.mark.parametrize("text,fragments", [
    ("node01 slots=0\n", ["hostfile:1", "host 'node01'", "slots"]),
    ("node01\nnode01\n", ["hostfile:2", "duplicate host"]),
    ("node01\nnode02 slots=two\n", ["hostfile:2", "'host slots=N'"]),
], ids=["zero-slots", "duplicate", "bad-slots"])
def test_bad_hostfile_is_one_line(tmp_path, text, fragments):
    path = write(tmp_path, text)
    with pytest.raises(InventoryError) as err:
        load(path, "hostfile")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(path)
    for frag in fragments:
        assert frag in msg, msg


@pytest.mark.parametrize("expr,names", [
    ("node[01-03]", ["node01", "node02", "node03"]),
    ("a,b,c", ["a", "b", "c"]),
    ("node01,", ["node01"]),
    ("gpu[1-2],cpu[07,09]", ["gpu1", "gpu2", "cpu07", "cpu09"]),
])
def test_hosts_on_the_command_line(tmp_path, monkeypatch, expr, names):
    monkeypatch.chdir(tmp_path)
    assert [h.name for h in load(expr)] == names


def test_one_name_without_a_comma_is_a_missing_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InventoryError, match="cluster.yaml: no such file .*-i 'node01,'"):
        load("cluster.yaml")
    assert [h.name for h in load("node01", "list")] == ["node01"]


def test_the_slurm_allocation(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_NODELIST", "sn[1-3],login")
    assert [h.name for h in load(None, "slurm")] == ["sn1", "sn2", "sn3", "login"]
    monkeypatch.delenv("SLURM_JOB_NODELIST")
    with pytest.raises(InventoryError, match=r"^\$SLURM_JOB_NODELIST: not set"):
        load(None, "slurm")


@pytest.mark.parametrize("text", ["[1, 2, 3]\n", "just: words: here\n", "{a: 1}\n",
                                  "node01 node02\n", "\n"])
def test_an_unreadable_format_says_which_formats_are_accepted(tmp_path, text):
    path = write(tmp_path, text, "inv.txt")
    with pytest.raises(InventoryError) as err:
        load(path)
    msg = str(err.value)
    assert msg.startswith(path) and "\n" not in msg
    assert ACCEPTED in msg or "invalid YAML" in msg, msg


def test_content_decides_the_format_whatever_the_name(tmp_path):
    # ... but a file named .yaml is YAML: INI in it is refused, not read as other hosts.
    path = write(tmp_path, "[g]\nn1\n", "x.yaml")
    with pytest.raises(InventoryError) as err:
        read(path)
    assert str(err.value).startswith(f"{path}: named .yaml but not YAML (it reads as an "
                                     "Ansible INI inventory or a hostfile): name it for what "
                                     "it is, or give --inventory-format; as YAML: "), err.value
    assert read(path, "ansible-ini").fmt == "ansible-ini"
    assert read(write(tmp_path, "n1\nn2 slots=2\n", "x.ini")).fmt == "hostfile"
    assert read(write(tmp_path, "hosts: {n1: {}}\n", "x.cfg")).fmt == "yaml"
    assert read(write(tmp_path, "all:\n  hosts:\n    n1:\n", "x")).fmt == "ansible-yaml"
    assert read(write(tmp_path, "n1 ansible_host=10.0.0.1\n", "y")).fmt == "ansible-ini"
    # A YAML mapping with a "[group]" line inside a quoted value is still YAML: its reader
    # names the field the value is bad for (the INI reader would misread the file).
    with pytest.raises(InventoryError, match="host 'n1': field 'address'"):
        read(write(tmp_path, "hosts:\n  n1:\n    address: '\n\n  [g]\n\n  '\n", "z"))


HOSTS = [Host(name=n, address=n, groups=g) for n, g in [
    ("gpu01", ("gpu", "rack1")), ("gpu02", ("gpu", "rack1")), ("gpu03", ("gpu", "rack2")),
    ("cpu01", ("cpu", "rack2"))]]


@pytest.mark.parametrize("pattern,names", [
    ("gpu01", ["gpu01"]),
    ("gpu", ["gpu01", "gpu02", "gpu03"]),
    ("gpu0[1-2]", ["gpu01", "gpu02"]),
    ("gpu*", ["gpu01", "gpu02", "gpu03"]),
    ("gpu,!gpu02", ["gpu01", "gpu03"]),
    ("gpu,&rack2", ["gpu03"]),
    ("!cpu01", ["gpu01", "gpu02", "gpu03"]),
    ("rack2,gpu01", ["gpu01", "gpu03", "cpu01"]),
])
def test_limit_names_groups_ranges_wildcards(pattern, names):
    assert [h.name for h in apply(HOSTS, pattern)] == names


@pytest.mark.parametrize("pattern,match", [
    ("gpu09", "'gpu09' matches no host or group"),
    ("gpu,!nope", "'nope' matches no host"),
    ("gpu,&cpu", "leaves no host"),
    ("gpu0[1-", "bad range"),
])
def test_limit_that_matches_nothing_is_an_error(pattern, match):
    with pytest.raises(UsageError, match=match):
        apply(HOSTS, pattern)


def test_limit_items_split_outside_brackets():
    assert split_items("a,node[01,03],!b") == ["a", "node[01,03]", "!b"]


def test_limit_applies_to_every_source(tmp_path):
    path = write(tmp_path, "[gpu]\ng1\ng2\n[cpu]\nc1\n")
    assert [h.name for h in load(path, limit_to="gpu,!g2")] == ["g1"]
    assert [h.name for h in load("n[1-4]", limit_to="n[2-3]")] == ["n2", "n3"]


@pytest.mark.parametrize("source,text,fragment", [
    ("yaml", "hosts:\n  'n[1-100000]': {}\n", "expands to 100,000 hosts"),
    ("ini", "[g]\nn[1:100000]\n", "is 100,000 hosts"),
    ("ini-nested", "[g]\nr[1:200]n[1:200]\n", "expands to 40,000 hosts"),
], ids=["yaml", "ansible-ini", "ansible-nested"])
def test_a_huge_range_is_refused_before_it_is_expanded(tmp_path, source, text, fragment):
    path = write(tmp_path, text, "inv")
    with pytest.raises(InventoryError, match=fragment) as err:
        load(path)
    assert str(err.value).startswith(path) and "a typo in a range?" in str(err.value)


def test_a_huge_host_list_or_limit_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InventoryError, match="expands to 1,001,000 hosts"):
        load("node[1-1000],gpu[1-1000][1-1000]")
    with pytest.raises(UsageError, match="--limit: .*expands to 100,000 hosts"):
        apply(HOSTS, "gpu[1-100000]")
    assert [h.name for h in load("node[1-20000]")][-1] == "node20000"  # the bound itself


TRAIN = "/opt/conda/envs/train/bin/python"
PYTHON_CASES = [
    # (source, its text, the python of n1 and n2 without --python, with --python TRAIN)
    ("gpu[1-2]", None, ["python3", "python3"], [TRAIN, TRAIN]),
    ("hostfile", "n1 slots=8\nn2 slots=8\n", ["python3", "python3"], [TRAIN, TRAIN]),
    ("inv.yaml", "hosts:\n  n1: {python: /opt/own/bin/python}\n  n2: {}\n",
     ["/opt/own/bin/python", "python3"], ["/opt/own/bin/python", TRAIN]),
    ("inv.yaml", "defaults: {python: /opt/all/bin/python}\nhosts:\n  n1: {}\n  n2: {}\n",
     ["/opt/all/bin/python"] * 2, ["/opt/all/bin/python"] * 2),
    # Ansible: preflight_python is the inventory's word for the training Python and wins;
    # ansible_python_interpreter (often the modules' system Python) only when nothing else.
    ("hosts.ini", "[gpu]\nn1 preflight_python=/opt/own/bin/python\nn2\n"
     "[gpu:vars]\nansible_python_interpreter=/usr/bin/python3\n",
     ["/opt/own/bin/python", "/usr/bin/python3"], ["/opt/own/bin/python", TRAIN]),
]


@pytest.mark.parametrize("source,text,plain,given", PYTHON_CASES,
                         ids=["hostlist", "hostfile", "yaml-host", "yaml-defaults", "ansible"])
def test_python_names_the_training_interpreter_where_the_inventory_does_not(
        tmp_path, monkeypatch, source, text, plain, given):
    monkeypatch.chdir(tmp_path)
    if text is not None:
        write(tmp_path, text, source)
    assert [h.python for h in load(source)] == plain
    assert [h.python for h in load(source, python=TRAIN)] == given


@pytest.mark.parametrize("text,line", [
    ("node01 slots=8\nnode02 slot=4\n", "node02 slot=4"),
    ("node01 slots=8\nnode02 slots=4 gpus=8\n", "node02 slots=4 gpus=8"),
    ("# hosts\nnode01:8\nnode02 : 4\n", "node02 : 4"),
    ("node01 slots=8\nnode02 slots=four\n", "node02 slots=four"),
], ids=["misspelt-key", "extra-key", "spaced-colon", "word-for-number"])
def test_a_hostfile_with_a_bad_line_is_named_not_read_as_ansible(tmp_path, text, line):
    # Read as Ansible INI, "node02 slot=4" would be a host with a variable nobody reads, and
    # its slots silently lost.
    path = write(tmp_path, text)
    with pytest.raises(InventoryError) as err:
        read(path)
    n = text.splitlines().index(line.strip()) + 1
    assert str(err.value).startswith(f"{path}:{n}: expected 'host', 'host slots=N'"), err.value


def test_host_lines_with_ansible_variables_stay_ansible(tmp_path):
    path = write(tmp_path, "n1 ansible_host=10.0.0.1\nn2 ansible_port=2222 slots=4\n")
    inv = read(path)
    assert inv.fmt == "ansible-ini" and [e.name for e in inv.entries] == ["n1", "n2"]
