"""The probe over SSH: one connection per host, the probe on the command's stdin, its failure
said in SSH's terms (connect, host key, auth, ...)."""

from __future__ import annotations

import logging
import time
from typing import Any

from preflight.common.hostjob import Job
from preflight.common.remote import MAX_OUTPUT, Done
from preflight.model.host import HostFailure, HostOutcome, Stage
from preflight.transport.ssh import connect as ssh
from preflight.transport.ssh.channel import run_with_input

log = logging.getLogger(__name__)


class SshJob(Job):
    """The probe over SSH: one connection, the probe on the command's stdin."""

    def _collect(self) -> HostOutcome:
        early = ssh.preflight_failure(self.host)
        if early:
            return HostOutcome(self.host, failure=early)
        self.conn = ssh.connection(self.host, self.opts.connect_timeout,
                                   self.opts.accept_new_host_keys)
        try:
            self.conn.open()
            self.stage = Stage.UPLOAD  # the probe travels on the command's stdin
            budget = self.probe_budget()
            self.sent_at = time.time()
            done = run_with_input(self.conn.client.get_transport(),
                                  self.call.command(self.host, self.opts, budget),
                                  self.call.payload(), timeout=max(0.1, self.remaining()),
                                  on_sent=self._probing)
            outcome = self._finish_done(done)
            if outcome.ok and self.opts.keep_connections:
                self.keep = True  # collect() hands it on, or closes it if it came too late
            return outcome
        finally:
            if not self.keep:
                _close_quietly(self.conn)

    def _probing(self) -> None:
        self.stage = Stage.PROBE

    def _finish_done(self, done: Done) -> HostOutcome:
        if done.overflow:
            return HostOutcome(self.host, failure=HostFailure(
                Stage.PROBE, f"probe printed more than {MAX_OUTPUT >> 20} MiB; cut off"),
                elapsed_s=time.monotonic() - self.started)
        if done.exit is None:  # the same event as the dispatcher's deadline, met first
            return self.deadline_outcome()
        return self.finish(done.stdout, done.exit, done.stderr)

    def abort(self) -> None:
        """Closing its transport unblocks whatever the thread waits on."""
        try:
            if self.conn is not None:
                self.conn.client.close()
        except Exception:
            pass


    def failure(self, e: BaseException) -> HostFailure:
        return ssh.classify(e, self.stage, self.host, self.opts.connect_timeout)


def _close_quietly(conn: Any) -> None:
    """Closes a connection whose work is done: a failure to close (the transport already
    gone, EOF from a jump host's channel) must not turn facts already read into a failure."""
    try:
        conn.close()
    except Exception as e:
        log.debug("closing %s: %s: %s", getattr(conn, "host", "?"), type(e).__name__, e)
