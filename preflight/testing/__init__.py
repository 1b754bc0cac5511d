"""The simulated cluster of network namespaces (testbed) and the demo that checks it. Shipped
because `preflight demo` is a command of the installed tool (the README's first); the tests
use the same testbed, and keep their own rigs (Slurm's) in tests/."""
