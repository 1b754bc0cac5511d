"""known_hosts read as OpenSSH reads it, checked against real OpenSSH: keys and hashed
lines made by ssh-keygen, lines preflight writes found again by `ssh-keygen -F`."""

from __future__ import annotations

import base64
import shutil
import subprocess

import pytest

from preflight.transport.ssh import knownhosts as K

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None,
                                reason="needs ssh-keygen (openssh-client)")


def new_key(tmp_path, name: str) -> tuple[str, str]:
    """Returns (type, base64) of a fresh ed25519 public key made by ssh-keygen."""
    path = tmp_path / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                   check=True)
    kind, b64 = (tmp_path / f"{name}.pub").read_text().split()[:2]
    return kind, b64


def blob(b64: str) -> bytes:
    return base64.b64decode(b64)


def test_plain_names_ports_wildcards_and_negation(tmp_path):
    kind, key = new_key(tmp_path, "k")
    path = tmp_path / "known_hosts"
    path.write_text(f"node01,10.0.0.1 {kind} {key}\n[node02]:2222 {kind} {key}\n"
                    f"*.rack1,!bad.rack1 {kind} {key}\n")
    kh = K.load([str(path)])
    assert not kh.warnings
    for names in (["node01"], ["NODE01"], ["10.0.0.1"], ["[node02]:2222"], ["x.rack1"]):
        assert K.check_key(kh, names, kind, blob(key)).status is K.Status.KNOWN, names
    for names in (["node02"], ["[node01]:2222"], ["bad.rack1"], ["node03"]):
        assert K.check_key(kh, names, kind, blob(key)).status is K.Status.UNKNOWN, names


def test_hashed_lines_written_by_ssh_keygen_are_found(tmp_path):
    kind, key = new_key(tmp_path, "k")
    path = tmp_path / "known_hosts"
    path.write_text(f"node01 {kind} {key}\n[node02]:2222 {kind} {key}\n")
    subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(path)], check=True,
                   capture_output=True)
    assert "node01" not in path.read_text() and path.read_text().startswith("|1|")
    kh = K.load([str(path)])
    assert K.check_key(kh, ["node01"], kind, blob(key)).status is K.Status.KNOWN
    assert K.check_key(kh, ["[node02]:2222"], kind, blob(key)).status is K.Status.KNOWN
    assert K.check_key(kh, ["node02"], kind, blob(key)).status is K.Status.UNKNOWN


def test_a_changed_key_is_changed_and_another_type_does_not_decide(tmp_path):
    kind, key = new_key(tmp_path, "old")
    _, other = new_key(tmp_path, "new")
    path = tmp_path / "known_hosts"
    path.write_text(f"node01 {kind} {key}\nnode02 ssh-rsa "
                    "AAAAB3NzaC1yc2EAAAADAQABAAAAgQDC\n")
    kh = K.load([str(path)])
    m = K.check_key(kh, ["node01"], kind, blob(other))
    assert m.status is K.Status.CHANGED and m.entry is not None and m.entry.key == blob(key)
    # node02 has only an RSA key recorded: an ed25519 key is not "changed" (OpenSSH asks
    # for the known type first; see ssh.key_order), it is unknown.
    assert K.check_key(kh, ["node02"], kind, blob(other)).status is K.Status.UNKNOWN
    assert K.known_types(kh, ["node02"]) == ["ssh-rsa"]


def test_revoked_keys_are_refused_and_markers_do_not_break_the_file(tmp_path):
    kind, key = new_key(tmp_path, "k")
    ca_kind, ca = new_key(tmp_path, "ca")
    path = tmp_path / "known_hosts"
    path.write_text(f"@cert-authority *.cluster {ca_kind} {ca}\n"
                    f"@revoked * {kind} {key}\n"
                    f"n1.cluster {kind} {key}\n")
    kh = K.load([str(path)])
    assert not kh.warnings
    assert K.check_key(kh, ["n1.cluster"], kind, blob(key)).status is K.Status.REVOKED
    assert [e.key for e in kh.for_names(["n7.cluster"], "cert-authority")] == [blob(ca)]
    assert kh.for_names(["n7.other"], "cert-authority") == []


def test_an_unreadable_line_is_skipped_with_a_warning_naming_file_and_line(tmp_path):
    kind, key = new_key(tmp_path, "k")
    path = tmp_path / "known_hosts"
    path.write_text(f"# comment\n@cert-authorty * {kind} {key}\nnode01 {kind} not-base64!\n"
                    f"node02 ssh-rsa {key}\nnode03\nnode04 {kind} {key}\n")
    kh = K.load([str(path)])
    assert [w.split(": ")[0] for w in kh.warnings] == [f"{path}:{i}" for i in (2, 3, 4, 5)]
    assert "unknown marker" in kh.warnings[0] and "not of type ssh-rsa" in kh.warnings[2]
    assert K.check_key(kh, ["node04"], kind, blob(key)).status is K.Status.KNOWN


def test_files_are_read_in_order_and_missing_ones_skipped(tmp_path):
    kind, key = new_key(tmp_path, "k")
    (tmp_path / "global").write_text(f"node01 {kind} {key}\n")
    kh = K.load([str(tmp_path / "absent"), str(tmp_path / "global")])
    assert K.check_key(kh, ["node01"], kind, blob(key)).status is K.Status.KNOWN


@pytest.mark.parametrize("hashed", [False, True], ids=["plain", "hashed"])
def test_lines_preflight_writes_are_read_back_by_openssh(tmp_path, hashed):
    kind, key = new_key(tmp_path, "k")
    path = tmp_path / "known_hosts"
    K.append(str(path), K.line_for(["[node01]:2222"], kind, key, hashed))
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    found = subprocess.run(["ssh-keygen", "-F", "[node01]:2222", "-f", str(path)],
                           capture_output=True, text=True)
    assert found.returncode == 0 and key in found.stdout
    assert (path.read_text().startswith("|1|")) is hashed
    assert K.check_key(K.load([str(path)]), ["[node01]:2222"], kind,
                       blob(key)).status is K.Status.KNOWN
