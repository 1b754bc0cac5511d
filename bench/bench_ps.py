"""Benchmark (not a test): what a PS job's active tests cost, on simulated hosts with Paddle
2.6.2: the fan-in and the PS round, and their share of the whole check, at several sizes.

    sudo .venv/bin/python bench/bench_ps.py [--hosts 8,16] [--servers 2] [--out bench-ps.json]

Each size is one real `preflight check` of a PS policy (--servers servers, every other host a
trainer, roles pinned by the inventory) with the active tests. Reported per size: the
check's wall time, the network stage's, the PS round's (launch, Paddle's import, the servers'
start, the trainers' training and the stop), its share of the check, the trainers' median
steps per second and step time, and the verdict.

--predict (4 hosts, one of them on a 100 Mbit/s link, the others on 1 Gbit/s, a model whose
steps exchange --dim floats a row): what the plan predicts a server on the slow host would
cost a step, beside what a round with the server there measures. First check: the slow host
may serve but is left out for its link, and the plan says its predicted step time; second
check, side by side on the same hosts: the slow host is the only one that may serve and the
link checks are waived, so the round runs with its server there."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from preflight.testing import testbed

POLICY = "mode: ps\nserver_num: {servers}\ntrainer_num: {trainers}\n" \
         "limits: {{ps_server_cores: 0, ps_trainer_cores: 0, cpu_busy_ratio: 100}}\n"


def check(tb: testbed.Testbed, inventory: str, policy: str,
          *more: str) -> dict[str, Any]:
    report = os.path.join(tb.base, f"bench-{time.monotonic_ns()}.json")
    start = time.monotonic()
    p = subprocess.run(tb.client_cmd([sys.executable, "-m", "preflight", "check", "-i",
                                      inventory, "--policy", policy, "--no-progress",
                                      "--iperf-seconds", "1", "--json", report, *more]),
                       capture_output=True, text=True, timeout=1800, cwd=tb.base,
                       env=dict(os.environ, PYTHONSAFEPATH="1"))
    wall = time.monotonic() - start
    with open(report) as fh:
        doc = json.load(fh)
    net = doc["network"] or {}
    ps = net.get("ps") or {}
    trainers = ps.get("trainers") or []
    rates = [t["steps"] / t["seconds"] for t in trainers if t["seconds"]]
    steps = [t["median_s"] for t in trainers if t.get("median_s")]
    return {"rc": p.returncode, "verdict": doc["verdict"], "run_s": round(wall, 1),
            "network_s": round(net.get("wall_s") or 0.0, 1),
            "ps_round_s": round(ps.get("wall_s") or 0.0, 1),
            "ps_share": round((ps.get("wall_s") or 0.0) / wall, 3),
            "trainers": len(trainers), "servers": len(ps.get("servers") or []),
            "steps_per_s_median": round(statistics.median(rates), 1) if rates else None,
            "step_ms_median": round(statistics.median(steps) * 1e3, 2) if steps else None,
            "fanin_hosts": len(net.get("fanin") or []), "error": ps.get("error"),
            "servers_on": sorted({x["host"] for x in ps.get("servers") or []}),
            "server_runs": [{k: x.get(k) for k in ("host", "wall_s", "cpu_s", "rx_bytes",
                                                    "tx_bytes")} for x in ps.get("servers") or []],
            "trainer_steps": sum(t["steps"] for t in trainers),
            "costs": (doc.get("plan") or {}).get("costs") or {},
            "reasons": doc["reasons"][:3]}


def predict(dim: int) -> dict[str, Any]:
    """A server on the slow host: the plan's predicted step time, then the measured one."""
    python = testbed.paddle_python("2.6.2")
    with testbed.Testbed(4) as tb:
        names = list(tb.hosts)
        slow = names[0]
        for h in names:
            tb.throttle(h, "100mbit" if h == slow else "1gbit")
        policy = os.path.join(tb.base, "predict-policy.yaml")
        with open(policy, "w") as fh:
            fh.write(POLICY.format(servers=1, trainers=2) + f"ps_model: {{dim: {dim}}}\n")

        def inventory(name: str, servers: list[str]) -> str:
            roles: dict[str, dict[str, object]] = {
                h: {"roles": ["server"] if h in servers else ["worker"]} for h in names}
            return tb.inventory(os.path.join(tb.base, name), names, python=python,
                                overrides=roles)

        left_out = check(tb, inventory("predict.yaml", [slow, names[1]]), policy)
        print(f"predicted: {json.dumps(left_out)}", flush=True)
        kept = check(tb, inventory("measure.yaml", [slow]), policy, "--skip", "bandwidth",
                     "--skip", "ps-fanin")
        print(f"measured: {json.dumps(kept)}", flush=True)
    cost = left_out["costs"].get(slow) or {}
    return {"dim": dim, "slow_host": slow, "predicted_with_ms": _ms(cost.get("with_s")),
            "predicted_without_ms": _ms(cost.get("without_s")),
            "measured_with_ms": kept["step_ms_median"] if kept["servers_on"] == [slow]
            else None, "measured_without_ms": left_out["step_ms_median"],
            "exchange_bytes": cost.get("bytes"), "runs": {"left_out": left_out,
                                                          "server_on_slow": kept}}


def _ms(s: Any) -> Any:
    return round(s * 1e3, 2) if isinstance(s, (int, float)) else None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", default="8,16")
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--out", default="bench-ps.json")
    ap.add_argument("--predict", action="store_true",
                    help="only the predicted vs measured step with a server on a slow host")
    ap.add_argument("--dim", type=int, default=1024)
    args = ap.parse_args()
    if args.predict:
        result = predict(args.dim)
        with open(args.out, "w") as fh:
            json.dump(result, fh, indent=2)
        print(json.dumps({k: v for k, v in result.items() if k != "runs"}))
        return 0
    python = testbed.paddle_python("2.6.2")
    cases: dict[str, dict[str, Any]] = {}
    for n in (int(x) for x in args.hosts.split(",")):
        with testbed.Testbed(n) as tb:
            names = list(tb.hosts)
            roles: dict[str, dict[str, object]] = {
                h: {"roles": ["server"] if i < args.servers else ["worker"]}
                for i, h in enumerate(names)}
            inv = tb.inventory(os.path.join(tb.base, "ps.yaml"), names, python=python,
                               overrides=roles)
            policy = os.path.join(tb.base, "ps-policy.yaml")
            with open(policy, "w") as fh:
                fh.write(POLICY.format(servers=args.servers, trainers=n - args.servers))
            cases[f"{n} hosts"] = check(tb, inv, policy)
            print(f"{n} hosts: {json.dumps(cases[f'{n} hosts'])}", flush=True)
    with open(args.out, "w") as fh:
        json.dump({"servers": args.servers, "cases": cases}, fh, indent=2)
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
