"""Run on the master's host before its launcher: Paddle's launcher takes anything that
accepts a connection on its --master port for its master, starts no store of its own, and
every launcher then waits for peers that never register (a job's master left running, a
process given the port since the ports check). Waits a little for the port; else names what
listens there (as /proc shows it to this user) after the HELD word, and exits with the HELD
code.

argv: ip port wait_s held_exit held_word. Python 3.6+."""

import os
import socket
import sys
import time


def taken(ip, port):
    """The listening sockets on the port, from this network namespace's tables (None: free);
    without them, a connection tells (refused: free), though not who."""
    inodes, read = set(), False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = open(table).read().splitlines()[1:]
        except OSError:
            continue
        read = True
        for row in rows:
            f = row.split()
            if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                inodes.add("socket:[%s]" % f[9])
    if read:
        return inodes or None
    try:
        socket.create_connection((ip, port), 1.0).close()
    except socket.timeout:  # bound, its backlog full: taken all the same
        pass
    except OSError:
        return None
    return set()


def holders(held):
    """'pid N: its command line' of each process holding one of the sockets."""
    who = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or not held:
            continue
        try:
            fds = os.listdir("/proc/%s/fd" % pid)
            if any(os.readlink("/proc/%s/fd/%s" % (pid, fd)) in held for fd in fds):
                with open("/proc/%s/cmdline" % pid, "rb") as fh:
                    cmd = fh.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
                who.append("pid %s: %s" % (pid, cmd[:160]))
        except OSError:
            continue
    return who


def main(argv):
    ip, port, end = argv[1], int(argv[2]), time.time() + float(argv[3])
    held = taken(ip, port)
    while held is not None and time.time() < end:
        time.sleep(0.2)
        held = taken(ip, port)
    if held is None:
        sys.exit(0)
    who = holders(held)
    print("%s%d %s" % (argv[5], port, "; ".join(who[:3]) or "a process this user cannot see"))
    sys.exit(int(argv[4]))


if __name__ == "__main__":
    main(sys.argv)
