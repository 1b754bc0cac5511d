"""Signals the processes of one of preflight's runs on a host, found by their command line,
with nothing but Python: inside a job's running container (whose image need not have pkill,
and where a process exec'd outlives a runtime client killed on the host) and for the port
reach's listener. Matches as `pkill -f` does: the command line, arguments joined by spaces;
never this process itself.

argv: the regex, a directory to remove after (or ""), the steps, comma-separated: a signal's
name, "wait" (a second) or "gone" (until nothing matches, 2 s at most). Python 3.6+."""

import os
import re
import shutil
import signal
import sys
import time


def hits(pat):
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            continue
        if pat.search(cmd):
            yield int(p)


def kill(pat, sig):
    for p in hits(pat):
        try:
            os.kill(p, sig)
        except OSError:
            pass


def main(argv):
    pat = re.compile(argv[1])
    for step in argv[3].split(","):
        if step == "wait":
            time.sleep(1)
        elif step == "gone":
            end = time.time() + 2
            while time.time() < end and any(True for _ in hits(pat)):
                time.sleep(0.05)
        else:
            kill(pat, getattr(signal, step))
    if argv[2]:
        shutil.rmtree(argv[2], ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv)
