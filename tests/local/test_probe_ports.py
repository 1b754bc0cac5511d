"""The probe's listening ports come from the kernel by state (NETLINK_SOCK_DIAG, as `ss -lt`
asks), the same set /proc/net/tcp{,6} lists, without walking the whole TCP hash table."""

from __future__ import annotations

import socket

from preflight.hostside import probe_net as probe


def _from_files() -> set[int]:
    ports = set()
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            text = open(path).read()
        except OSError:
            continue
        for line in text.splitlines()[1:]:
            parts = line.split()
            if len(parts) > 3 and parts[3] == "0A":
                ports.add(int(parts[1].rsplit(":", 1)[1], 16))
    return ports


def test_listening_ports_over_sock_diag_are_the_files_ones():
    v4 = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    v6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    connected = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        v4.bind(("127.0.0.1", 0))
        v4.listen()
        v6.bind(("::1", 0))
        v6.listen()
        connected.connect(v4.getsockname())  # an established socket is not listening
        got = probe.netlink_listening()
        assert v4.getsockname()[1] in got and v6.getsockname()[1] in got
        assert connected.getsockname()[1] not in got
        assert got == _from_files()
        assert probe.listening_ports() == {"tcp": sorted(got)}
    finally:
        for s in (v4, v6, connected):
            s.close()
