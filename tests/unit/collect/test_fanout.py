"""The one command a host runs: every value quoted, the probe bounded by the host's own timeout."""

from __future__ import annotations

from preflight.collect.fanout import remote_command
from preflight.common.hostjob import CollectOptions
from preflight.model.host import Host


def test_remote_command_bounds_the_probe_on_the_host():
    host = Host(name="n", address="10.0.0.1")
    cmd = remote_command(host, CollectOptions(), budget=42)
    assert "timeout -k 2 43" in cmd
    assert cmd.startswith("sh -c ")
