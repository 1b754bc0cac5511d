"""Shipped for tests and the demo (as fabric.testing is): the simulated cluster of network
namespaces (testbed), the demo that checks it, and a Remote for this machine (local)."""
