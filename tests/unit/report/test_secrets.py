"""One redaction for every output (common/secrets.py): a corpus of secret shapes is hidden
from every report format, the terminal, the watch's results log and console, a drain's reason
and the facts, wherever it stands; ordinary lines are kept whole. Each output is tested
through the code that writes it, so a redaction call removed fails its test."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reportdocs import full_doc, paths
from watchtools import cluster as watch_cluster

from preflight.cli import main
from preflight.collect.parse import env
from preflight.common import secrets
from preflight.common.secrets import HIDDEN, hide, hide_lines, scrub
from preflight.config.errors import InputError
from preflight.hostside.container import SECRET_MARKERS, training_env
from preflight.model.findings import Finding, Status
from preflight.report import jsonreport
from preflight.transport.slurm.drain import drain_actions
from preflight.transport.slurm.steps import Node
from preflight.watch.record import Record
from preflight.watch.samples import HostStream
from preflight.watch.view import line

# (text holding a secret, the secret): the shapes users' logs, command lines and variables
# hold them in.
SECRETS = [
    ("PADDLE_ACCESS_KEY=ak9Zq1x7", "ak9Zq1x7"),
    ("export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENGbPxRfiCY", "wJalrXUtnFEMIK7MDENG"),
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9xyzQ", "eyJhbGciOiJIUzI1NiJ9xyzQ"),
    ("curl -H 'Authorization: Basic dXNlcjpwYXNzd29yZA==' https://x", "dXNlcjpwYXNzd29yZA"),
    ("git clone https://alice:hunter2pass@git.example.com/r.git", "hunter2pass"),
    ("redis://:p4ssw0rdX@cache:6379/0", "p4ssw0rdX"),
    ("mysql --password hunter2db -u root", "hunter2db"),
    ("train.py --api-key=zzz999key", "zzz999key"),
    ('{"token": "tk-77af31"}', "tk-77af31"),
    ("DB_PASS: s3cr3tvalue", "s3cr3tvalue"),
    ("password = 'two s3cret words'", "s3cret"),
    ("HF_TOKEN=hf_AbCdEfGhIjKlMnOp", "hf_AbCdEfGhIjKlMnOp"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAq7\n-----END RSA PRIVATE KEY-----",
     "MIIEpAIBAAKCAQEAq7"),
    ("key id AKIAIOSFODNN7EXAMPLE in use", "AKIAIOSFODNN7EXAMPLE"),
    ("pushed with ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnop"),
    ("slack xoxb-123456789012-abcdefABCDEF", "xoxb-123456789012"),
]
# Lines with nothing secret in them, kept whole.
ORDINARY = [
    "step 120 loss 0.0312 lr=0.001",
    "python -m paddle.distributed.launch --master 10.0.0.1:6767 --nnodes 3 train.py",
    "PWD=/home/alice/job", "NCCL_SOCKET_IFNAME=eth0", "max_tokens=512 tokens_per_s=1834.2",
    "http://10.0.0.5:8080/metrics", "author=alice", "FLAGS_eager_delete_tensor_gb=0.0",
    "RuntimeError: (PreconditionNotMet) The third-party dynamic library (libcudnn.so) ...",
]


@pytest.mark.parametrize("text,secret", SECRETS, ids=[s for _, s in SECRETS])
def test_every_shape_of_secret_is_hidden_and_what_held_it_kept(text, secret):
    said = hide(text)
    assert secret not in said and HIDDEN in said, said
    assert hide(said) == said  # hidden once: hiding again changes nothing


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_lines_are_kept_whole(text):
    assert hide(text) == text


def _every_pattern(text: str) -> str:
    """hide() without the test that lets most text through untouched."""
    for pattern, to in secrets._PATTERNS:
        text = pattern.sub(to, text)
    return text


# Pieces texts are made of: the secret shapes, names and schemes in any case, and plain words.
_PIECES = st.sampled_from([t for t, _ in SECRETS] + ORDINARY + [
    "DB_PASS", "x-key", "session_id", "Cookie", "privateKey", "Bearer", "digest", "token",
    "tokens", "=", ": ", " ", "'", '"', "--", "https://u:p@h", "abc123XYZ", "value", "AKIA",
    "ghs_", "sk-", "eyJ", "-----BEGIN EC PRIVATE KEY-----", "-----END EC PRIVATE KEY-----"])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_PIECES, st.booleans()), max_size=8))
def test_a_text_let_through_untouched_holds_nothing_any_pattern_hides(parts):
    """The quick test that spares most text the patterns never lets a secret through: any
    text one of them would change, or a secret name, is one it stops."""
    text = "".join(p.upper() if up else p for p, up in parts)
    if not secrets.may_hold_secret(text):
        assert _every_pattern(text) == text
        assert not secrets.NAME.search(text), text
    assert hide(text) == _every_pattern(text)


def test_the_quick_test_stops_every_shape_and_lets_ordinary_lines_through():
    assert all(secrets.may_hold_secret(t) for t, _ in SECRETS)
    assert all(secrets.may_hold_secret(t.lower()) and secrets.may_hold_secret(t.upper())
               for t, _ in SECRETS)
    # What a job's lines hold is let through untouched (what makes it quick), but for the
    # words a secret is named by (then the patterns read it, and keep it whole).
    stopped = [t for t in ORDINARY if secrets.may_hold_secret(t)]
    assert stopped == ["max_tokens=512 tokens_per_s=1834.2", "http://10.0.0.5:8080/metrics"]


def test_a_private_key_across_a_logs_lines_is_hidden_line_by_line():
    tail = ["loading", "-----BEGIN OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjEAAAAA",
            "QyNTUxOQAAACBxyz", "-----END OPENSSH PRIVATE KEY-----", "step 3"]
    said = hide_lines(tail)
    assert said[0] == "loading" and said[-1] == "step 3"
    assert not any("b3Blbn" in ln or "QyNTUx" in ln for ln in said), said
    assert scrub({"tail": tail})["tail"] == said


def test_the_hosts_names_of_secrets_are_the_vocabularys():
    """The probe hides a container's secret variables before they leave the host; what it
    hides is what the vocabulary calls secret."""
    from preflight.common.secrets import is_secret_name
    assert all(is_secret_name(f"PADDLE{m}" if m.startswith("_") else f"PADDLE_{m}")
               for m in SECRET_MARKERS)
    hidden = training_env({"PADDLE_API_TOKEN": "x", "NCCL_DEBUG": "INFO"})
    assert hidden["PADDLE_API_TOKEN"] != "x"


def _secret_in_every_string(doc: Any, text: str) -> Any:
    if isinstance(doc, str):
        return f"{doc} {text}"
    if isinstance(doc, dict):
        return {k: _secret_in_every_string(v, text) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_secret_in_every_string(v, text) for v in doc]
    return doc


# ---------------------------------------------------------------- reports
FULL = full_doc()
PATHS = [p for p in paths(FULL, items=99) if p]
def _at(doc: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        doc = doc[key]
    return doc


TEXT_PATHS = [p for p in PATHS if isinstance(_at(FULL, p), str)]


def _outputs(tmp_path, doc: dict[str, Any], capsys) -> str:
    """Everything `preflight report` writes of doc: every file format and the terminal."""
    src = tmp_path / "in.json"
    src.write_text(json.dumps(doc))
    outs = [tmp_path / f"out.{ext}" for ext in ("json", "xml", "md", "html")]
    main(["report", str(src), "--json", str(outs[0]), "--junit", str(outs[1]),
          "--markdown", str(outs[2]), "--html", str(outs[3]), "-v", "--color", "never"])
    got = capsys.readouterr()
    return "\n".join([got.out, got.err, *(p.read_text() for p in outs)])


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from(TEXT_PATHS), shape=st.sampled_from(SECRETS))
def test_a_secret_in_any_field_of_a_report_is_in_no_output(tmp_path_factory, capsys, where,
                                                            shape):
    text, secret = shape
    doc = copy.deepcopy(FULL)
    parent = _at(doc, where[:-1])
    parent[where[-1]] = f"{parent[where[-1]]} {text}"
    tmp = tmp_path_factory.mktemp("secret")
    try:
        jsonreport.read(str(_write(tmp, doc)))
    except InputError:
        return  # a field that takes no free text refuses it: nothing to write
    said = _outputs(tmp, doc, capsys)
    assert secret not in said, (where, text)


def test_a_secret_in_every_field_of_a_report_at_once_is_in_no_output(tmp_path, capsys):
    """Every free-text field of a real report holding a secret, each format written."""
    for text, secret in SECRETS:
        doc = copy.deepcopy(FULL)
        for where in TEXT_PATHS:
            parent = _at(doc, where[:-1])
            trial = copy.deepcopy(doc)
            _at(trial, where[:-1])[where[-1]] = f"{parent[where[-1]]} {text}"
            try:
                jsonreport.read(str(_write(tmp_path, trial)))
            except InputError:
                continue
            parent[where[-1]] = f"{parent[where[-1]]} {text}"
        assert text in json.dumps(doc) or secret in json.dumps(doc)  # planted
        said = _outputs(tmp_path, doc, capsys)
        assert secret not in said, text


def _write(tmp, doc: dict[str, Any]):
    p = tmp / "probe.json"
    p.write_text(json.dumps(doc))
    return p


# ---------------------------------------------------------------- the watch
def test_a_secret_in_any_string_of_a_sample_is_in_no_results_log_or_console(tmp_path):
    hosts = watch_cluster(2)
    hosts[0].ranks[0].last = "step 3 " + " ".join(t for t, _ in SECRETS[:8])
    stream = HostStream(hosts[0].name)
    doc = json.loads(hosts[0].line())
    doc = _secret_in_every_string(doc, " ".join(t for t, _ in SECRETS))
    tick = stream.feed(json.dumps(doc))
    log = tmp_path / "watch.jsonl"
    rec = Record(str(log))
    rec.sample(hosts[0].name, tick.line)
    f = Finding("dead", Status.FAIL, ("node01",),
                "node01 rank 0 exited: " + " ".join(t for t, _ in SECRETS))
    rec.findings("finding", [f])
    rec.event("act", step="drain", said=" ".join(t for t, _ in SECRETS))
    rec.close()
    written = log.read_text()
    console = line(f, 0)
    for _, secret in SECRETS:
        assert secret not in written and secret not in console, secret
    assert json.loads(written.splitlines()[0])["sample"]["jobs"]  # still a sample


def test_a_drains_reason_hides_its_secrets():
    why = "dead: watch: node01 rank 0 exited: RuntimeError: connect with API_TOKEN=t0k3nX"
    [action] = drain_actions({"node01": why}, {"node01": Node("node01", "10.0.0.1", "idle")})
    assert action.command and "t0k3nX" not in " ".join(action.command) + action.why
    assert "reason=dead: watch: node01 rank 0 exited" in " ".join(action.command)


def test_the_facts_hide_a_secret_variable_and_a_secret_inside_a_value():
    got = dict(env({"vars": {"PADDLE_ACCESS_KEY": "ak9Zq1x7", "NCCL_DEBUG": "INFO",
                             "PADDLE_STORE": "https://u:hunter2pass@store:443/x",
                             "PADDLE_API_TOKEN": "<redacted>"}}).vars)
    assert got["PADDLE_ACCESS_KEY"] == HIDDEN and got["NCCL_DEBUG"] == "INFO"
    assert "hunter2pass" not in got["PADDLE_STORE"] and "u:" in got["PADDLE_STORE"]
    assert got["PADDLE_API_TOKEN"] == "<redacted>"


def test_scrub_keeps_what_is_not_text():
    doc = {"n": 3, "f": 1.5, "none": None, "ok": True, "l": [1, "x"], "t": ("a", 2)}
    assert scrub(doc) == doc
