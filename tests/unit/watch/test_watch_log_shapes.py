"""A watch's log of any shape is read back or refused as bad input in one line naming the
file and line (exit 2), never an internal error: records with fields of the wrong type, times
no clock can say, numbers past a float, JSON nested past the interpreter's depth. A sampler
line with a number past a float is a line skipped (the live watch reads on), not a crash."""

from __future__ import annotations

import json

import pytest

from preflight.cli import main
from preflight.config.errors import InputError
from preflight.watch.replay import read
from preflight.watch.samples import BadSample, HostStream

START = {"type": "start", "at": 1_800_000_000, "hosts": ["h1"], "marker": "", "policy": {},
         "at_check": {}, "addresses": {}}
DEEP = '{"type": "sample", "at": 1800000001, "host": "h1", "sample": ' + "[" * 5000 + \
    "]" * 5000 + "}"

BAD = [
    ("number-past-a-float", '{"type": "sample", "at": 1800000001, "host": "h1", "sample": '
     '{"v": 1, "n": 1e400, "t": 1800000001, "jobs": []}}', "OverflowError"),
    ("time-a-string", '{"type": "finding", "at": "x", "check": "dead", "status": "fail", '
     '"hosts": ["h1"], "message": "m"}', "at is not a time: x"),
    ("check-a-number", '{"type": "finding", "at": 1800000001, "check": 3, "status": "fail", '
     '"hosts": ["h1"], "message": "m"}', "its check is not a str"),
    ("hosts-a-string", '{"type": "finding", "at": 1800000001, "check": "dead", "status": '
     '"fail", "hosts": "h1", "message": "m"}', "its hosts is not a list"),
    ("spell-a-string", '{"type": "time", "job": "j", "spent": "stepping", "start": "a", '
     '"end": 1}', "start is not a time: a"),
    ("time-past-a-clock", '{"type": "end", "at": 1e400, "code": 0}', "at is not a time: inf"),
    ("code-a-string", '{"type": "end", "at": 1800000002, "code": "x"}',
     "its code is not an exit code"),
    ("nested-too-deep", DEEP, "a JSON line nested too deep"),
]


@pytest.mark.parametrize("line,said", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_a_record_of_the_wrong_shape_is_bad_input_naming_its_line(tmp_path, capsys, line,
                                                                  said):
    path = tmp_path / "watch.jsonl"
    path.write_text(json.dumps(START) + "\n" + line + "\n")
    with pytest.raises(InputError) as err:
        read(str(path))
    assert str(err.value).startswith(f"{path}:2: ") and said in str(err.value), str(err.value)
    assert main(["report", str(path)]) == 2
    out = capsys.readouterr()
    assert out.err.startswith("preflight: error: ") and out.err.count("\n") == 1, out.err


def test_a_sample_with_a_number_past_a_float_is_a_line_skipped_not_a_crash():
    stream = HostStream("h1")
    with pytest.raises(BadSample, match="OverflowError"):
        stream.feed('{"v": 1, "n": 1e400, "t": 1800000001, "jobs": []}')
    tick = stream.feed('{"v": 1, "n": 2, "t": 1800000002, "jobs": []}')
    assert tick.n == 2  # the stream reads on
