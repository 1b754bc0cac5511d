"""The port reach's connector: connects to every address:port given, at most argv[2] at
once, each within the timeout argv[1]; prints PREFLIGHT-REACH and {endpoint: null (reached)
or why not} as JSON.

argv: timeout, most at once, the endpoints. Python 3.6+."""

import json
import socket
import sys
import threading


def main(argv):
    t, most = float(argv[1]), int(argv[2])
    out = {}  # type: dict
    gate = threading.BoundedSemaphore(most)

    def one(ep):
        a, p = ep.rsplit(":", 1)
        with gate:
            try:
                socket.create_connection((a.strip("[]"), int(p)), t).close()
                out[ep] = None
            except socket.timeout:
                out[ep] = "timed out"
            except ConnectionResetError:
                out[ep] = None  # something there answered
            except OSError as e:
                out[ep] = e.strerror or str(e)

    ts = [threading.Thread(target=one, args=(e,)) for e in argv[3:]]
    for x in ts:
        x.start()
    for x in ts:
        x.join(t + 2)
    print("PREFLIGHT-REACH " + json.dumps(out))


if __name__ == "__main__":
    main(sys.argv)
