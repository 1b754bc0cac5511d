"""Collection: one round trip per host over SSH -> facts (or why there are none).

- ssh: Fabric connections with verified host keys; failures worded as findings
- remote: commands over an open connection, every wait bounded
- fanout: the probe on every host, bounded in concurrency and time -> HostOutcomes
- probe/: the probe's parts (standard library only, Python 3.6+), which probe_text joins
  into the one text shipped to each host
- parse, smi: the probe's output (untrusted) -> HostFacts
"""
