"""A sampler line that does not read is a gap in that host's samples, said and skipped: the
watch reads on, the host is still watched (the lines of tests/fixtures/watch/
broken-lines.json, between two real ones)."""

from __future__ import annotations

import io
import json
import pathlib
from dataclasses import replace
from typing import Optional

from preflight.common.remote import Done
from preflight.model.findings import Status
from preflight.model.watch import WatchPolicy
from preflight.watch import run

BROKEN = json.loads((pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "watch"
                     / "broken-lines.json").read_text())


class Printed:
    """A sampler that printed these lines, then runs on (or ended with exit)."""

    def __init__(self, lines: list[str], exit: Optional[int] = None, said: str = "") -> None:
        self.data = "".join(ln + "\n" for ln in lines).encode()
        self.exit, self.said = exit, said

    def read_until(self, marker: str, timeout: float) -> bool:
        return False

    def output(self) -> str:
        return ""

    def take(self) -> bytes:
        data, self.data = self.data, b""
        return data

    def wait(self, timeout: float) -> Done:
        return Done(self.exit, "", self.said)

    def close(self) -> None:
        pass


class Host:
    def __init__(self, name: str, lines: list[str]) -> None:
        self.name, self.lines = name, lines

    def start(self, command: str) -> Printed:
        return Printed(self.lines)

    def run(self, command: str, timeout: float) -> Done:
        return Done(0, "", "")


def test_every_broken_line_is_skipped_and_said_once_and_the_host_stays_watched():
    lines = [BROKEN["before"], *(c["line"] for c in BROKEN["cases"]), BROKEN["after"]]
    policy = replace(WatchPolicy(), interval_s=0.2, persist_s=0.4)
    opts = run.WatchOptions(policy=policy, duration_s=1.0)
    result = run.watch({"good1": Host("good1", lines)}, {}, opts, None, io.StringIO())
    assert result.samples == 2  # the two real lines; none of the broken ones
    [said] = [f for f in result.findings if f.status is Status.WARN]
    assert said.check == "watch" and said.hosts == ("good1",)
    assert said.data["skipped"] == len(BROKEN["cases"])
    assert "did not read as a sample and were skipped" in said.message
    # Its sampler is not taken for ended: (its lines stop here, so it is said to be quiet,
    # as any host whose samples stop.)
    assert not [f for f in result.findings if f.status is Status.COULD_NOT_CHECK
                and "not a sample" in f.message]


class Dropping:
    """A host whose first sampler prints a line and its connection drops (exit 255); the
    samplers started after it print the rest."""

    def __init__(self, name: str, lines: list[str]) -> None:
        self.name, self.lines, self.starts = name, lines, 0

    def start(self, command: str) -> Printed:
        self.starts += 1
        if self.starts == 1:
            return Printed(self.lines[:1], 255, "Connection closed by 10.0.0.2")
        return Printed(self.lines[1:])

    def run(self, command: str, timeout: float) -> Done:
        return Done(0, "", "")


def test_a_sampler_that_ends_in_error_is_started_again_after_a_backoff_and_said():
    lines = [BROKEN["before"], BROKEN["after"]]
    host = Dropping("good1", lines)
    policy = replace(WatchPolicy(), interval_s=0.2, persist_s=0.4)
    out = io.StringIO()
    result = run.watch({"good1": host}, {}, run.WatchOptions(policy=policy, duration_s=1.5),
                       None, out)
    assert host.starts == 2  # once, then again after 0.4 s (2 x the interval)
    assert result.samples == 2  # the line before the drop and the one after
    said = out.getvalue()
    assert "its sampler ended (exit 255: Connection closed by 10.0.0.2); starting its " \
        "sampler again in 0.4 s (try 1)" in said, said
    assert "cleared  watch" in said  # once it answers again


def test_a_host_that_printed_no_sample_by_the_end_of_a_short_watch_could_not_be_checked():
    # Shorter than the silence that makes a host stale: at the end it is still said, never
    # passed unseen.
    policy = replace(WatchPolicy(), interval_s=0.2, persist_s=0.4)
    result = run.watch({"good1": Host("good1", [BROKEN["before"]]),
                        "mute": Host("mute", [])}, {},
                       run.WatchOptions(policy=policy, duration_s=1.0), None, io.StringIO())
    mute = [f for f in result.findings if "mute" in f.hosts]
    assert [(f.check, f.status) for f in mute] == [("watch", Status.COULD_NOT_CHECK)]
    assert "mute: no sample in 1 s since the watch began" in mute[0].message
    assert result.code == run.EXIT_FINDINGS


class Refusing(Dropping):
    """A host whose first sampler drops, whose next start is refused (the host rebooting),
    and whose third runs."""

    def start(self, command: str) -> Printed:
        if self.starts == 1:
            self.starts += 1
            raise OSError("Connection refused")
        return super().start(command)


def test_a_sampler_that_cannot_be_started_again_backs_off_in_the_watchs_intervals():
    host = Refusing("good1", [BROKEN["before"], BROKEN["after"]])
    policy = replace(WatchPolicy(), interval_s=0.2, persist_s=0.4)
    out = io.StringIO()
    result = run.watch({"good1": host}, {}, run.WatchOptions(policy=policy, duration_s=2.5),
                       None, out)
    said = out.getvalue()
    # 2 then 4 intervals: 0.4 s, then 0.8 s (not seconds counted from 1 s)
    assert "could not start its sampler again: OSError: Connection refused; starting its " \
        "sampler again in 0.8 s (try 2)" in said, said
    assert host.starts == 3 and result.samples == 2


class Endless(Printed):
    """A sampler that prints chunk after chunk with no newline, then (after) a real line."""

    def __init__(self, chunks: int, size: int, after: str) -> None:
        super().__init__([])
        self.chunks, self.size, self.after = chunks, size, after

    def take(self) -> bytes:
        if self.chunks:
            self.chunks -= 1
            return b"x" * self.size
        data, self.after = (self.after + "\n").encode() if self.after else b"", ""
        return b"\n" + data if data else b""


def test_a_line_that_never_ends_is_held_to_its_bound_skipped_and_said(monkeypatch):
    monkeypatch.setattr(run, "LINE_MAX", 4096)

    class Remote(Host):
        def start(self, command: str) -> Printed:
            return Endless(60, 1000, BROKEN["after"])

    h = run._Host("host1", Remote("host1", []), "sampler")
    held = []
    for _ in range(60):  # each read brings 1,000 bytes more of the same line
        assert h.lines() == []
        held.append(len(h.partial))
    # Never more than the bound and one read is kept; what came past it is dropped.
    assert max(held) <= 4096 + 1000 and held[-1] < 4096, held
    assert h.bad == 1 and h.bad_last == "a line of over 4,096 bytes (5,000 so far), not a " \
        "sample", h.bad_last
    # The line's end ends the dropping: the sample after it is read as ever.
    assert h.lines() == [BROKEN["after"]]
    assert h.bad == 1 and not h.dropping
