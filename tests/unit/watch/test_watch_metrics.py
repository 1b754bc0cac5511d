"""The watch's OpenMetrics: what a scrape shows of the ranks, the hosts and the findings."""

from __future__ import annotations

import urllib.request

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from watchtools import POLICY, cluster, watched

from preflight.watch.metrics import Metrics


def values(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def snapshot():
    hosts = cluster(2)

    def stop(t):
        if t == 30:
            hosts[1].ranks[0].state = "T"

    findings, state = watched(hosts, 30, change=stop)
    m = Metrics()
    m.update(state, findings, POLICY.persist_s / 2, now=31.0)  # its last sample at 30 s
    return m


def test_a_scrape_has_each_ranks_pace_and_state_and_the_findings_by_host():
    text = generate_latest(snapshot().registry).decode()
    v = values(text)
    r1 = (("host", "node01"), ("job", "master 10.0.0.1:6767"), ("rank", "0"),
          ("role", "worker"))
    r2 = (("host", "node02"), ("job", "master 10.0.0.1:6767"), ("rank", "1"),
          ("role", "worker"))
    assert v[("preflight_watch_rank_progress_per_second", r1)] == 10.0
    assert v[("preflight_watch_rank_busy_cores", r1)] == 0.4
    assert v[("preflight_watch_rank_stopped", r1)] == 0.0
    assert v[("preflight_watch_rank_stopped", r2)] == 1.0
    assert v[("preflight_watch_findings", (("check", "stopped"), ("host", "node02"),
                                           ("status", "fail")))] == 1
    assert v[("preflight_watch_host_load1", (("host", "node01"),))] == 1.0
    assert v[("preflight_watch_host_sample_age_seconds", (("host", "node01"),))] == 1.0


def test_the_endpoint_serves_the_same_on_loopback():
    m = snapshot()
    server = m.serve("127.0.0.1", 0)
    try:
        port = server.server_address[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
    finally:
        server.shutdown()
    assert "preflight_watch_rank_stopped{" in text and 'host="node02"' in text


def test_the_textfile_is_written_whole(tmp_path):
    path = tmp_path / "preflight_watch.prom"
    snapshot().write(str(path))
    assert "preflight_watch_findings{" in path.read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["preflight_watch.prom"]
