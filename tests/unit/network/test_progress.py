"""A host's all-reduce status as status_script prints it: ranks, stages, heartbeats; and who
is behind on the way to the rendezvous."""

from __future__ import annotations

import subprocess

from preflight.network import progress as P


def test_status_script_prints_what_the_ranks_wrote(tmp_path):
    run = tmp_path / ".preflight-ar-x"
    run.mkdir()
    (run / "launch.log").write_text("LAUNCH INFO 1 Waiting peer start...\n")
    (run / "progress.0").write_text('{"e": "start", "t": 10.0, "pid": 7}\n'
                                    '{"e": "init", "t": 12.0}\n'
                                    '{"e": "join", "t": 13.0, "rank": 1, "world": 2, '
                                    '"backend": "gloo"}\n{"e": "op", "n": 1, "t": 14.0}\n'
                                    '{"e": "size", "bytes": 1048576, "seconds": 0.25, '
                                    '"t": 15.0}\n{"e": "op", "n"')  # cut mid-write
    (run / "beat.0").write_text("15.5")
    (run / "beat.0.tmp").write_text("16.0")
    out = subprocess.run(["sh", "-c", P.status_script(str(run))], capture_output=True,
                         text=True, timeout=10).stdout
    s = P.parse_status(out)
    assert s is not None and s.launcher_waiting and s.now > 1e9
    [r] = s.ranks
    assert (r.local, r.rank, r.world, r.backend, r.ops) == ("0", 1, 2, "gloo", 1)
    assert r.sizes == ((1048576, 0.25),) and r.beat == 15.5 and not r.done
    assert r.stage == P.JOINED and s.stage(1) == P.JOINED
    assert s.stage(2) == P.LAUNCHER_UP  # a second local rank never started


def test_no_run_directory_is_no_status(tmp_path):
    out = subprocess.run(["sh", "-c", P.status_script(str(tmp_path / "gone"))],
                         capture_output=True, text=True, timeout=10).stdout
    assert out == "" and P.parse_status(out) is None


def test_the_hosts_furthest_behind_are_named_with_how_far_they_got():
    def host(*events, waiting=True):
        lines = [f"{P.NOW}100"] + ([P.LAUNCHER] if waiting else [])
        lines += [f'{P.PROGRESS}0 {{"e": "{e}", "t": 90}}' for e in events]
        return P.parse_status("\n".join(lines))
    progress = {"a": host("start", "init"), "b": host("start"), "c": host("start", "init"),
                "d": None}
    # d never answered: it is the furthest behind of all.
    assert P.behind(progress, dict.fromkeys("abcd", 1)) == {
        "d": "no answer from it about the run"}
    del progress["d"]
    assert P.behind(progress, dict.fromkeys("abc", 1)) == {
        "b": "its worker was still starting (importing Paddle)"}
    assert P.behind({"a": host("start"), "b": host("start")}, dict.fromkeys("ab", 1)) == {}
