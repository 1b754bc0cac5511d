"""The parts of the simulated cluster (testing/testbed.py's Testbed is built of them): system
(what they share, and what they run on this machine), sshd (each host's own), containers
(Podman in the hosts), faults (real ones, planted in a host), stalls (frozen cgroups, storage
that does not answer) and shapes (a real cluster's: users, CAs, bastions)."""
