"""A healthy network-bound job of few steps a window, judged again: the watch's log of
tests/cluster/test_watch.py's job of real shapes (six ranks on three simulated hosts, every
link shaped to 40 Mbit/s and kept full by the job's all-reduce, rank 0 evaluating every 20
steps, watched at --interval 2 --persist 6), run twice, captured on a machine where it ran at
about 0.8 step lines a second a rank: 2 or 3 lines in each half of the window.

Counted so, one line fewer reads as 20 % to 40 % slower: the rules took every other window
for a fallen pace, and with the job's queues full as always (learned for too few windows yet)
named good1's link, and the link from good2 to good1, in three judgements. Nobody may be
named at any judgement, and the job is still said for what it is."""

from __future__ import annotations

from pathlib import Path

from preflight.model.findings import Status
from preflight.watch.replay import judged_again

LOG = Path(__file__).resolve().parents[2] / "fixtures" / "watch" / \
    "network-bound-shapes-3.3.1.jsonl.gz"


def test_a_network_bound_job_of_few_steps_a_window_is_never_slowed_by_its_count():
    judgements = judged_again(str(LOG))
    assert len(judgements) >= 50  # both runs, two seconds apart
    named = [(round(j.at - judgements[0].at), f.check, f.hosts, f.message[:120])
             for j in judgements for f in j.findings
             if f.status not in (Status.PASS, Status.SKIP, Status.WARN)]
    assert named == []
    said = [f for j in judgements for f in j.findings]
    # What it is by design, still said: network-bound, and rank 0 busier from its start.
    assert any(f.check == "network" and "it is network-bound" in f.message for f in said)
    assert any(f.check == "shape" and f.hosts == ("good1",) for f in said)
    # Its pace read and passed, of every host, in both runs.
    paced = [f for f in said if (f.check, f.status) == ("progress", Status.PASS)]
    assert paced and set(paced[0].hosts) == {"good1", "good2", "good3"}
