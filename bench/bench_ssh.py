"""Benchmark (not a test): what the user's SSH setup costs a check, measured side by side on
one simulated cluster in one run: hosts by IP in preflight's YAML (the baseline), the same
hosts by alias through an OpenSSH config with a hashed known_hosts (names resolved by the
cluster's /etc/hosts), and the same through a bastion (the controller reaches only h1; one
SSH session to it carries every other host's connection).

    sudo .venv/bin/python bench/bench_ssh.py [--sizes 16,32] [--repeat 3] [--out bench-ssh.json]

Each check is the facts only (--no-network-tests --no-paddle --cpu-sample 0.1), timed as the
whole process; the three shapes are interleaved and the minimum of --repeat runs is kept."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from preflight.testing import testbed

FLAGS = ["--no-network-tests", "--no-paddle", "--cpu-sample", "0.1", "--no-progress",
         "--no-log"]


def check(tb: testbed.Testbed, *args: str) -> tuple[float, int]:
    """Returns (wall seconds, hosts that answered) of one check from the client."""
    report = os.path.join(tb.base, f"bench-{time.monotonic_ns()}.json")
    start = time.monotonic()
    subprocess.run(tb.client_cmd([sys.executable, "-m", "preflight", "check", *args, *FLAGS,
                                  "--json", report], names=True),
                   capture_output=True, text=True, timeout=600, cwd=tb.base,
                   env=dict(os.environ, PYTHONSAFEPATH="1", HOME=tb.base))
    wall = time.monotonic() - start
    with open(report) as fh:
        doc = json.load(fh)
    return wall, sum(1 for h in doc["hosts"].values() if h["status"] == "ok")


def setup(tb: testbed.Testbed) -> tuple[str, str, str]:
    """Returns (the YAML inventory by IP, the alias hostfile, the bastion config)."""
    by_ip = tb.inventory(os.path.join(tb.base, "by-ip.yaml"))
    names = list(tb.hosts)
    hostfile = os.path.join(tb.base, "hostfile")
    with open(hostfile, "w") as fh:
        fh.writelines(f"node-{n}\n" for n in names)
    known = os.path.join(tb.base, "known_hosts_hashed")
    with open(known, "w") as fh:
        for n in names:
            with open(os.path.join(tb.hosts[n].dir, "ssh_host_ed25519_key.pub")) as pub:
                kind, b64 = pub.read().split()[:2]
            fh.write(f"{n} {kind} {b64}\n")
    testbed.run(["ssh-keygen", "-q", "-H", "-f", known])
    common = (f"Host node-*\n    User root\n    IdentityFile {tb.identity}\n"
              f"    UserKnownHostsFile {known}\n    HashKnownHosts yes\n")
    aliases = "".join(f"Host node-{n}\n    HostName {n}\n" for n in names)
    for name, text in (("direct", aliases + common),
                       ("bastion", f"Host node-* !node-{names[0]}\n    ProxyJump node-{names[0]}\n"
                        + aliases + common)):
        with open(os.path.join(tb.base, f"ssh_config-{name}"), "w") as fh:
            fh.write(text)
    return by_ip, hostfile, os.path.join(tb.base, "ssh_config-bastion")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="16,32")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="bench-ssh.json")
    args = ap.parse_args()
    rows = []
    for n in [int(x) for x in args.sizes.split(",")]:
        with testbed.Testbed(n) as tb:
            by_ip, hostfile, bastion = setup(tb)
            direct_cfg = os.path.join(tb.base, "ssh_config-direct")
            times: dict[str, list[float]] = {"ip": [], "config": [], "bastion": []}
            ok: dict[str, int] = {}
            for _ in range(args.repeat):
                for shape, argv in (("ip", ["-i", by_ip]),
                                    ("config", ["-i", hostfile, "-F", direct_cfg]),
                                    ("bastion", ["-i", hostfile, "-F", bastion])):
                    if shape == "bastion":
                        tb.isolate_client(next(iter(tb.hosts)))
                    try:
                        wall, answered = check(tb, *argv)
                    finally:
                        if shape == "bastion":
                            tb.reconnect_client()
                    times[shape].append(wall)
                    ok[shape] = answered
        best = {k: round(min(v), 3) for k, v in times.items()}
        rows.append({"hosts": n, "answered": ok, "wall_s_min": best,
                     "config_over_ip": round(best["config"] / best["ip"], 2),
                     "bastion_over_ip": round(best["bastion"] / best["ip"], 2)})
        print(json.dumps(rows[-1]), flush=True)
    with open(args.out, "w") as fh:
        json.dump({"repeat": args.repeat, "rows": rows}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
