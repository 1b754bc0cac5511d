"""SSH as the transport: connections (OpenSSH's config applied, bastions as Fabric gateways),
host keys judged as OpenSSH judges them (known_hosts, certificates), the probe's job over one
connection per host, commands over paramiko channels, and the transport itself."""
