"""Commands over SSH that end without an exit status say why: sshd sends the signal that killed
a command instead (exit-signal, which paramiko drops: collect/remote reads it), and none
comes when the connection goes (paramiko reads both as -1). And a connection, or a jump host's
session, outlives the commands closed on it while they still print (paramiko's own wake-up
pipe, closed under its transport thread, killed it: transport/ssh/wake.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.cluster

# Run in the client namespace: connect to good1 as the CLI would, then run commands.
SCRIPT = """\
import json, sys, threading
from preflight.inventory import load
from preflight.transport.ssh import connect as ssh
from preflight.transport.ssh.channel import SshRemote
[host] = load(sys.argv[1])
import logging; logging.basicConfig(level=logging.ERROR)
conn = ssh.connection(host, 10.0, False)
conn.open()
remote = SshRemote(host.name, conn)
out = {}
d = remote.run("echo half; kill -9 $$", timeout=20)
out["signal"] = [d.exit, d.tail(), d.stdout]
# The connection goes while a command runs (as when the host drops off the network).
out["lost_port"] = conn.client.get_transport().sock.getsockname()[1]
threading.Timer(1.0, conn.client.get_transport().close).start()
d = remote.run("sleep 10; echo never", timeout=20)
out["lost"] = [d.exit, d.tail(), d.stdout]
# The next command connects again: stopping and cleaning up still reach the host.
out["again"] = remote.run("echo again", timeout=20).stdout
# The host's side of the connection ends (its sshd session process dies): EOF, said so.
conn = ssh.connection(host, 10.0, False)
conn.open()
out["port"] = conn.client.get_transport().sock.getsockname()[1]
d = SshRemote(host.name, conn).run("kill -9 $PPID; sleep 10", timeout=20)
out["closed"] = [d.exit, d.tail(), d.stdout]
print(json.dumps(out))
"""


def test_a_command_without_exit_status_says_killed_or_connection_lost(cluster):
    inv = cluster.inventory("remote-good1.yaml", ["good1"])
    p = subprocess.run(cluster.tb.client_cmd([sys.executable, "-c", SCRIPT, inv]),
                       capture_output=True, text=True, timeout=60, cwd=cluster.tb.base,
                       env=dict(os.environ, PYTHONSAFEPATH="1"))
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout.splitlines()[-1])
    exit, tail, stdout = out["signal"]
    assert exit == -1 and "(killed by signal KILL)" in tail and stdout == "half\n", out
    exit, tail, stdout = out["lost"]
    assert exit == -1 and "connection to the host was lost" in tail and stdout == "", out
    assert out["again"] == "again\n", out
    exit, tail, stdout = out["closed"]
    assert exit == -1 and "connection to the host was lost: the host closed it" in tail, out
    # What a failing cluster test shows of the host's sshd log names that connection as one
    # with no end logged (the client's own, closed or lost, end in the log).
    said = cluster.tb.sshd_unusual("good1", last=1000)
    silent = said.rsplit("(connections from port ", 1)[-1].split(": no end")[0].split(", ")
    assert str(out["port"]) in silent, said
    assert str(out["lost_port"]) not in silent, said


# Many commands on one connection at once, each cut off while its output still streams (a
# poll that timed out, a rank stopped mid-run), as the all-reduce's polls and ranks do.
RACE = """\
import json, sys, threading, time
from preflight.inventory import load
from preflight.transport.ssh import connect as ssh
from preflight.transport.ssh.channel import SshRemote
[host] = load(sys.argv[1])
import logging; logging.basicConfig(level=logging.ERROR)
conn = ssh.connection(host, 10.0, False)
conn.open()
remote = SshRemote(host.name, conn)
transport = conn.client.get_transport()
each = int(sys.argv[2])
end = time.monotonic() + 60  # a bound, not a measure: a lost connection ends it sooner
runs = []
def one():
    n = 0
    while n < each and time.monotonic() < end and transport.is_active():
        remote.run("exec yes preflight", timeout=0.02)
        n += 1
    runs.append(n)
threads = [threading.Thread(target=one) for _ in range(6)]
for t in threads:
    t.start()
for t in threads:
    t.join(90)
why = transport.saved_exception
print(json.dumps({"runs": sum(runs), "alive": transport.is_active(),
                  "why": None if why is None else f"{type(why).__name__}: {why}",
                  "after": remote.run("echo after", timeout=20).stdout}))
"""


def test_commands_cut_off_while_they_print_leave_the_connection_up(cluster):
    inv = cluster.inventory("remote-good1.yaml", ["good1"])
    p = subprocess.run(cluster.tb.client_cmd([sys.executable, "-c", RACE, inv, "10"]),
                       capture_output=True, text=True, timeout=120, cwd=cluster.tb.base,
                       env=dict(os.environ, PYTHONSAFEPATH="1"))
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout.splitlines()[-1])
    # The commands ran, and were cut off, 6 x 10 times, six at once; the connection outlived
    # them all.
    assert out["runs"] == 60, (out, p.stderr[-3000:])
    assert out["alive"] and out["why"] is None and out["after"] == "after\n", \
        (out, p.stderr[-3000:])


# Connections through a jump host closed while their command still prints: the jump host's
# session carries the data of all of them, and must outlive each.
JUMP_RACE = """\
import dataclasses, json, sys, time
import logging; logging.basicConfig(level=logging.ERROR)
from preflight.inventory import load
from preflight.transport.ssh import connect as ssh
from preflight.transport.ssh.channel import SshRemote
hosts = {h.name: h for h in load(sys.argv[1])}
behind = hosts["good1"].with_ssh(dataclasses.replace(hosts["good1"].ssh,
                                                      jump=(hosts["good2"],)))
end = time.monotonic() + 60  # a bound, not a measure
n, said = 0, []
while n < int(sys.argv[2]) and time.monotonic() < end:
    conn = ssh.connection(behind, 10.0, False)
    conn.open()
    ch = SshRemote(behind.name, conn).start("exec yes preflight")
    said.append(ch.read_until("preflight", 10))
    conn.close()  # the command still prints
    n += 1
[gateway] = ssh._gateways.values()
jump = gateway.client.get_transport()
why = jump.saved_exception
conn = ssh.connection(behind, 10.0, False)
conn.open()
print(json.dumps({"runs": n, "read": all(said), "alive": jump.is_active(),
                  "why": None if why is None else f"{type(why).__name__}: {why}",
                  "after": SshRemote(behind.name, conn).run("echo after", timeout=20).stdout}))
"""


def test_connections_through_a_jump_host_closed_mid_output_leave_its_session_up(cluster):
    inv = cluster.inventory("remote-good12.yaml", ["good1", "good2"])
    p = subprocess.run(cluster.tb.client_cmd([sys.executable, "-c", JUMP_RACE, inv, "12"]),
                       capture_output=True, text=True, timeout=120, cwd=cluster.tb.base,
                       env=dict(os.environ, PYTHONSAFEPATH="1"))
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout.splitlines()[-1])
    assert out["runs"] == 12 and out["read"], (out, p.stderr[-3000:])
    assert out["alive"] and out["why"] is None and out["after"] == "after\n", \
        (out, p.stderr[-3000:])
