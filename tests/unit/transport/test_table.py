"""The table of transports: one per way a host is reached, picked from what the user gave."""

from __future__ import annotations

import ast
import pathlib

import pytest

from preflight.config.errors import UsageError
from preflight.inventory.query import HostQuery, hosts_of, lists_hosts
from preflight.model.host import Via
from preflight.transport import table
from preflight.transport.base import Transport
from preflight.transport.local.transport import LocalTransport
from preflight.transport.slurm.transport import SlurmTransport
from preflight.transport.ssh.transport import SshTransport

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_every_way_of_reaching_a_host_has_one_transport_that_says_so():
    assert set(table.TRANSPORTS) == set(Via)
    for via, cls in table.TRANSPORTS.items():
        assert cls.via is via
        assert isinstance(cls(), Transport)  # the protocol's methods, all of them


@pytest.mark.parametrize("via, inventory, fmt, expected", [
    (Via.SSH, "hosts.yaml", "auto", SshTransport),
    (Via.SSH, None, "auto", LocalTransport),  # no inventory: this machine alone
    (Via.SSH, None, "slurm", SshTransport),  # the allocation's nodes, over SSH
    (Via.SLURM, None, "slurm", SlurmTransport),
    (Via.SLURM, "node[1-4]", "auto", SlurmTransport),
    (Via.LOCAL, None, "auto", LocalTransport),
], ids=["ssh", "no-inventory", "allocation-over-ssh", "slurm", "slurm-nodelist", "local"])
def test_the_transport_of_a_run(via, inventory, fmt, expected):
    assert table.pick(via, lists_hosts(inventory, fmt)) is expected


def test_slurm_reads_the_allocation_when_no_inventory_is_given():
    assert table.inventory_format(Via.SLURM, None, "auto") == "slurm"
    assert table.inventory_format(Via.SLURM, "node[1-2]", "auto") == "auto"
    assert table.inventory_format(Via.SSH, None, "auto") == "auto"


def test_local_refuses_an_inventory_in_one_line():
    with pytest.raises(UsageError, match="this machine alone.*hosts.yaml"):
        hosts_of(HostQuery("hosts.yaml"), Via.LOCAL, LocalTransport.alone)


def test_local_finds_this_machine_with_the_interpreter_given():
    [me] = hosts_of(HostQuery(python="/opt/paddle/bin/python"), Via.LOCAL,
                    LocalTransport.alone)
    assert me.via is Via.LOCAL and me.python == "/opt/paddle/bin/python"


def _names_the_transport(side: ast.AST) -> bool:
    """Via.SLURM, or a value named for the transport (args.transport, host.via)."""
    if isinstance(side, ast.Attribute) and isinstance(side.value, ast.Name) and \
            side.value.id == "Via":
        return True
    name = side.attr if isinstance(side, ast.Attribute) else \
        side.id if isinstance(side, ast.Name) else None
    return name in ("transport", "via")


def _compares_a_transport(node: ast.AST) -> bool:
    """A comparison that asks which transport it is: `args.transport == "slurm"`,
    `host.via is Via.SSH`, `isinstance(transport, SlurmTransport)`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id == "isinstance" and len(node.args) == 2:
        kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
        return any(isinstance(k, (ast.Name, ast.Attribute)) and
                   (k.id if isinstance(k, ast.Name) else k.attr).endswith("Transport")
                   for k in kinds)
    if not isinstance(node, ast.Compare):
        return False
    sides = [node.left, *node.comparators]
    if any(isinstance(s, ast.Constant) and s.value is None for s in sides):
        return False  # `transport is not None`: paramiko's transport, there or not
    return any(_names_the_transport(side) for side in sides)


def test_no_stage_branches_on_the_transport_outside_the_transports():
    # A new transport is one module and its line in the table: nothing else may ask which
    # transport it is. The model defines Via (and says which hosts SSH reached).
    allowed = (ROOT / "preflight" / "transport", ROOT / "preflight" / "model",
               ROOT / "preflight" / "testing")
    found = []
    for folder in (ROOT / "preflight", ROOT / "checks", ROOT / "inventory"):
        for path in folder.rglob("*.py"):
            if any(path.is_relative_to(a) for a in allowed):
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if _compares_a_transport(node):
                    found.append(f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}")
    assert not found, f"branches on the transport: {found}"


def test_the_branch_finder_finds_a_branch():
    assert _compares_a_transport(ast.parse('args.transport == "slurm"', mode="eval").body)
    assert _compares_a_transport(ast.parse("h.via is not Via.LOCAL", mode="eval").body)
    assert _compares_a_transport(ast.parse("transport != 'ssh'", mode="eval").body)
    assert not _compares_a_transport(ast.parse('fmt == "slurm"', mode="eval").body)
    assert not _compares_a_transport(ast.parse("transport is not None", mode="eval").body)
    assert not _compares_a_transport(ast.parse('stage == "slurm"', mode="eval").body)
    assert _compares_a_transport(ast.parse("isinstance(t, SlurmTransport)", mode="eval").body)
    assert _compares_a_transport(ast.parse("isinstance(t, (int, slurm.SlurmTransport))",
                                           mode="eval").body)
    assert not _compares_a_transport(ast.parse("isinstance(t, Host)", mode="eval").body)
