"""Commands over SSH that end without an exit status say why: sshd sends the signal that killed
a command instead (exit-signal, which paramiko drops: collect/remote reads it), and none
comes when the connection goes (paramiko reads both as -1)."""

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
