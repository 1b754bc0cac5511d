"""The data that flows through preflight: frozen dataclasses and enums only (no I/O, no YAML,
no SSH). Every stage speaks these types; nothing here imports another stage.

- host: a host to check, and the outcome of collecting its facts (or the stage that failed)
- facts: what the probe reported of one host, section by section (netfacts: its network's;
  gpufacts: its GPUs' and Paddle's)
- measure: what the active tests measured (iperf3 runs, the all-reduce)
- policy: what the job needs (pins, files, ports, limits, the job's shape)
- cluster: the one input of every check
- findings: findings, statuses and the verdict
- plan: the placement plan
- baseline: host profiles, baselines and audits
- watch: a running job's ranks and hosts as the watch samples them, and its settings
"""
