"""Runs compared over time: host profiles, baselines of known-good clusters, diffs of reports.

- profile: a host's facts -> the Profile a baseline records and an audit compares
- baseline: the baseline section of a report, written and read back
- diff: what changed between two reports
"""
