"""Commands on this machine through sh, with the interface of a remote host (a Remote):
the local audit's, the tests' (iperf3 pairs, the all-reduce, preflight launch run the very
commands an SSH host would, without SSH), and Slurm's, whose steps are local srun commands."""

from __future__ import annotations

import subprocess
import threading
import time
from typing import Any, Optional

from preflight.common.hostjob import Job
from preflight.common.remote import MAX_OUTPUT, POLL_S, Done, Started
from preflight.model.host import HostOutcome, Stage

CLOSE_S = 3.0  # what a process stopped with TERM gets before KILL


class LocalProcess:
    """A local subprocess with the same interface as a channel (reader threads, bounded)."""

    def __init__(self, command: str) -> None:
        self.p = subprocess.Popen(["/bin/sh", "-c", command], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        self.out, self.err = bytearray(), bytearray()
        self.readers = [threading.Thread(target=self._read, args=(s, b), daemon=True)
                        for s, b in ((self.p.stdout, self.out), (self.p.stderr, self.err))]
        for t in self.readers:
            t.start()

    @staticmethod
    def _read(stream: Any, buf: bytearray) -> None:
        for chunk in iter(lambda: stream.read1(65536), b""):
            if len(buf) < MAX_OUTPUT:
                buf += chunk

    def read_until(self, marker: str, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if marker.encode() in self.out:
                return True
            if self.p.poll() is not None:
                break
            time.sleep(POLL_S)
        return marker.encode() in self.out

    def output(self) -> str:
        return self.out.decode("utf-8", "replace")

    def take(self) -> bytes:
        data = bytes(self.out)
        del self.out[:len(data)]  # only what was copied: a reader may append meanwhile
        return data

    def wait(self, timeout: float) -> Done:
        try:
            code: Optional[int] = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            code = None
        for t in self.readers:
            t.join(0.5 if code is not None else 0)
        return Done(code, self.out.decode("utf-8", "replace"), self.err.decode("utf-8", "replace"))

    def close(self) -> None:
        if self.p.poll() is None:
            # TERM first: a wrapper (srun) passes it on and ends what it started remotely.
            self.p.terminate()
            try:
                self.p.wait(CLOSE_S)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


class LocalRemote:
    """Commands on this machine through sh (a Remote without SSH)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def start(self, command: str) -> Started:
        return LocalProcess(command)

    def run(self, command: str, timeout: float) -> Done:
        proc = LocalProcess(command)
        try:
            return proc.wait(timeout)
        finally:
            proc.close()


class LocalJob(Job):
    """The probe on this machine: the same command and payload as over SSH, in a
    subprocess (no shell, no SSH)."""

    proc: Optional[subprocess.Popen[bytes]] = None

    def _collect(self) -> HostOutcome:
        budget = self.probe_budget()
        self.stage = Stage.PROBE
        self.sent_at = time.time()
        self.proc = subprocess.Popen(self.call.argv(self.host, self.opts, budget),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        try:
            out, err = self.proc.communicate(self.call.payload(),
                                             timeout=max(0.1, self.remaining()))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            return self.deadline_outcome()
        code = self.proc.returncode
        return self.finish(out.decode("utf-8", "replace"), 128 - code if code < 0 else code,
                           err.decode("utf-8", "replace"))  # -N: killed by signal N

    def abort(self) -> None:
        try:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.kill()
        except Exception:
            pass
