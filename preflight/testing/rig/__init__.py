"""The parts of the simulated cluster (testing/testbed.py's Testbed is built of them): system
(what they share, and what they run on this machine), containers (Podman in the hosts),
faults (real ones, planted in a host) and shapes (a real cluster's: users, CAs, bastions)."""
