"""Commands on this machine through sh, as a remote host (kept here for the tests: the class
lives in preflight.collect.local, where the Slurm transport uses it too)."""

from __future__ import annotations

from preflight.collect.local import LocalProcess, LocalRemote

__all__ = ["LocalProcess", "LocalRemote"]
