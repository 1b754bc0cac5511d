"""The watch's score on its labelled corpus (tests/corpus/watch/cases.yaml): every case
replayed through this version's rules, with --act rehearsed (drain, stop and check said, not
run), at full speed; per case and in total, the false blames, the wrong actions (those on
healthy cases among them), the faults found and the times from a fault to its finding and to
its action (median / worst). The table docs/benchmarks.md shows.

    .venv/bin/python bench/score_watch.py [-k NAME] [--jobs N]

Exit 1 where a case does worse than its label allows (or better than its known misses: lower
them), as the tests do (tests/unit/watch/test_watch_corpus.py)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from corpustools import load, problems, scored, table  # noqa: E402  (tests/ on the path)

from preflight.watch.score import CaseScore  # noqa: E402


def _score(name: str) -> CaseScore:
    case = next(c for c in load() if c.name == name)
    return scored(case)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-k", dest="only", help="only the cases whose name holds this")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    cases = [c for c in load() if not args.only or args.only in c.name]
    start = time.monotonic()
    with ProcessPoolExecutor(args.jobs) as pool:
        scores = list(pool.map(_score, [c.name for c in cases]))
    print("\n".join(table(cases, scores)))
    print(f"\nscored in {time.monotonic() - start:.0f} s ({args.jobs} processes)")
    bad = [p for c, s in zip(cases, scores) for p in problems(c, s)]
    for p in bad:
        print(p, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
