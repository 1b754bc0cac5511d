"""The files check: the job's script and configs hash alike on every host."""

from __future__ import annotations

from dataclasses import replace

from support import cluster, messages, same

from preflight.checks import files
from preflight.model import facts as F
from preflight.model.cluster import Cluster
from preflight.model.findings import Status
from preflight.model.policy import Policy


def with_policy(c: Cluster, **kw) -> Cluster:
    return replace(c, policy=replace(Policy(), **kw))


def ff(**paths) -> F.FilesFacts:
    return F.FilesFacts(tuple(F.FileFact(p, **v) for p, v in paths.items()))


def test_files_alike_differ_missing():
    good = ff(**{"/job/train.py": {"sha256": "a" * 64, "size": 10}})
    odd = ff(**{"/job/train.py": {"sha256": "b" * 64, "size": 10}})
    gone = ff(**{"/job/train.py": {"error": "FileNotFoundError: No such file or directory"}})
    c = with_policy(cluster(n1={"files": good}, n2={"files": good}, n3={"files": odd},
                            n4={"files": gone}, n5={"files": F.SectionError("boom")}),
                    files=("/job/train.py",))
    fs = list(files.check(c))
    assert messages(fs, Status.FAIL) == [
        "n4: /job/train.py: FileNotFoundError: No such file or directory",
        "n3: /job/train.py sha256 bbbbbbbbbbbb != aaaaaaaaaaaa (2 of 3 hosts)"]
    assert messages(fs, Status.COULD_NOT_CHECK) == ["n5: could not read file hashes: boom"]
    assert [f.hosts for f in fs if f.status is Status.PASS] == [("n1", "n2")]


def test_files_not_asked_for_means_no_findings():
    assert list(files.check(cluster(**same(2)))) == []
