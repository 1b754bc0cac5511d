"""The port reach's listener: binds every port given (all addresses, as the job's processes
may), says which it could not (PREFLIGHT-BIND port why), says PREFLIGHT-LISTENING, then
accepts until its time is up, closing each connection after its peer did.

argv: the run's token (found by the stop), its lifetime in seconds, the ports. Python 3.6+."""

import select
import socket
import sys
import time


def main(argv):
    end = time.time() + float(argv[2])
    socks, conns = [], []  # type: list, list
    for p in argv[3:]:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", int(p)))
            s.listen(64)
        except OSError as e:
            print("PREFLIGHT-BIND %s %s" % (p, e), flush=True)
            continue
        socks.append(s)
    print("PREFLIGHT-LISTENING", flush=True)
    while socks and time.time() < end:
        for s in select.select(socks + conns, [], [], 0.5)[0]:
            try:
                if s in socks:
                    conns.append(s.accept()[0])
                else:  # the peer closed first: no TIME_WAIT left on the port the job binds
                    conns.remove(s)
                    s.close()
            except OSError:
                pass


if __name__ == "__main__":
    main(sys.argv)
