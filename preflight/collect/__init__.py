"""Collection: one round trip per host over SSH -> facts (or why there are none).

- ssh: Fabric connections with verified host keys; failures worded as findings
- remote: commands over an open connection, every wait bounded
- fanout: the probe on every host, bounded in concurrency and time -> HostOutcomes
- container: the probe's argument for a host whose job runs in a container
(the probe itself, and how it travels, is hostside's)
- parse (with parse_net, parse_gpu and their typed readers, fields), smi: the probe's
  output (untrusted) -> HostFacts
"""
