"""Stalls planted in simulated hosts, each a real one: a job's processes frozen by the cgroup v1
freezer (as `docker pause`, a Kubernetes or Slurm freeze does), and a filesystem they write to
frozen with fsfreeze (a storage stall: every writer waits in the kernel, state D). Both are
thawed before the testbed ends anything: a frozen process cannot even die."""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence

from preflight.testing.rig.system import BedState, TestbedError, run

CGROUP_FREEZER = "/sys/fs/cgroup/freezer"


class Stalls(BedState):
    """A Testbed's stalls, recorded in its freezers and scratch."""

    def freeze(self, name: str, pids: Sequence[int]) -> str:
        """Freezes these processes of the host (a job's ranks) in a freezer cgroup of their
        own; returns it. thaw() or close() thaws them."""
        if not os.path.isdir(CGROUP_FREEZER):
            raise TestbedError("no cgroup v1 freezer here")
        path = os.path.join(CGROUP_FREEZER, f"preflight-{self.id}-{name}-frozen")
        if path not in self.freezers:
            os.mkdir(path)
            self.freezers.append(path)
        for pid in pids:
            _write(os.path.join(path, "cgroup.procs"), str(pid))
        _write(os.path.join(path, "freezer.state"), "FROZEN")
        return path

    def thaw(self, name: str) -> None:
        """Thaws what freeze() froze on the host."""
        for path in self.freezers:
            if path.endswith(f"-{name}-frozen"):
                _write(os.path.join(path, "freezer.state"), "THAWED")

    def scratch_fs(self, name: str, path: str, mb: int = 64) -> None:
        """Mounts a filesystem of its own (ext4 on a loop device) at path (under the host's
        private /root) in the host's mount namespace: what runs there after writes to it,
        and only there. Unmounted with the namespace, when the host's sshd ends."""
        host = self.hosts[name]
        if host.sshd is None or not path.startswith("/root/"):
            raise TestbedError(f"{path}: a scratch filesystem goes under {name}'s /root")
        os.makedirs(os.path.join(host.dir, "root", path[len("/root/"):]), exist_ok=True)
        image = os.path.join(host.dir, f"scratch-{len(self.scratch)}.img")
        with open(image, "wb") as fh:
            fh.truncate(mb << 20)
        run(["mkfs.ext4", "-q", image])
        run([*self._in_mounts(name), "mount", "-o", "loop", image, path])
        self.scratch.append((name, path))

    def freeze_fs(self, name: str, path: str) -> None:
        """Freezes the host's scratch filesystem at path: its writers wait (state D)."""
        run([*self._in_mounts(name), "fsfreeze", "--freeze", path])

    def thaw_fs(self, name: str, path: str) -> None:
        run([*self._in_mounts(name), "fsfreeze", "--unfreeze", path], check=False)

    def _in_mounts(self, name: str) -> list[str]:
        host = self.hosts[name]
        assert host.sshd is not None
        return ["nsenter", f"--mount=/proc/{host.sshd.pid}/ns/mnt"]

    def _thaw_all(self) -> None:
        """Thaws every frozen cgroup and filesystem this testbed froze (close() calls it
        first, so that what it ends can end)."""
        for path in self.freezers:
            try:
                _write(os.path.join(path, "freezer.state"), "THAWED")
            except OSError:
                pass
        for name, path in self.scratch:
            host = self.hosts.get(name)
            if host is not None and host.sshd is not None and host.sshd.poll() is None:
                self.thaw_fs(name, path)

    def _remove_freezers(self) -> None:
        for path in self.freezers:
            remove_freezer(path)


def remove_freezer(path: str) -> None:
    """Thaws a freezer cgroup, moves what is left in it to the top and removes it."""
    try:
        _write(os.path.join(path, "freezer.state"), "THAWED")
        with open(os.path.join(path, "cgroup.procs")) as fh:
            for task in fh.read().split():
                _write(os.path.join(CGROUP_FREEZER, "cgroup.procs"), task)
        os.rmdir(path)
    except OSError:
        pass


def thaw_remains(testbed_id: str) -> list[str]:
    """The freezer cgroups a testbed whose process died left, thawed (so that its processes
    can be ended); returns them for removal once they are."""
    paths = glob.glob(os.path.join(CGROUP_FREEZER, f"preflight-{testbed_id}-*"))
    for path in paths:
        try:
            _write(os.path.join(path, "freezer.state"), "THAWED")
        except OSError:
            pass
    return paths


def _write(path: str, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)
