"""This machine as the transport, audited alone: the probe and commands as local processes."""
