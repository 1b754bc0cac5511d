"""Collection: one round trip per host over SSH -> facts (or why there are none).

- ssh: Fabric connections with verified host keys; failures worded as findings
- remote: commands over an open connection, every wait bounded
- fanout: the probe on every host, bounded in concurrency and time -> HostOutcomes
- probe_script: the script shipped to each host (standard library only, Python 3.6+)
- parse, smi: the probe's output (untrusted) -> HostFacts
"""
