"""The active tests: iperf3 between hosts and an all-reduce across them -> NetworkTests.
Measures only; the checks judge.

- schedule: rounds of disjoint iperf3 pairs (ring or matrix)
- iperf: iperf3 commands, their JSON output, rounds run over open connections
- localise: which host or path is slow (pure; shared with the checks that judge it)
- budget: the all-reduce's sizes and iterations that fit its time budget (pure)
- allreduce: the all-reduce through Paddle's own launcher (its script is hostside's)
- orchestrate: survey and retests of suspects; then the all-reduce over the hosts kept
- plan_stages: on the plan so far, a PS plan's fan-in and round, and the port reach
"""
